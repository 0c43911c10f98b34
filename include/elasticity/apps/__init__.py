"""Applications shipped with the product (`app.class=elasticity.apps.<module>:build`)."""
