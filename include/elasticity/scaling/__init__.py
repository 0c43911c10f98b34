"""Choosing a job's elasticity factor: a time schedule of factors, the autosizer (lag against the
measured rate, within bounds and a cool-down), and the one decision over both that a person's manual
hold overrides. Pure: what they choose is applied through the ordinary rescale path."""
