"""SASL logins as Kafka's clients take them: a JAAS line (`<LoginModule> required username="..."
password="...";`) read into a user and password, and written from them (an Airflow connection's login). The
password never appears in an error."""

from __future__ import annotations

import re

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

_JAAS = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)\s+(?P<options>.*?)\s*;\s*$", re.S)
_JAAS_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


def parse_jaas(text: str, mechanism: str) -> tuple[str, str]:
    """(username, password) of a JAAS line, `<LoginModule> required username="..." password="...";`.
    A ValueError never quotes the line (it holds the password)."""
    m = _JAAS.match(text)
    if m is None:
        raise ValueError('expected `<LoginModule> required username="..." password="...";`')
    module, options, rest = m["module"], {}, m["options"]
    while rest.strip():
        o = _JAAS_OPTION.match(rest)
        if o is None:
            raise ValueError('expected options as name="value" separated by spaces')
        options[o[1]] = re.sub(r"\\(.)", r"\1", o[2]) if o[2] is not None else o[3]
        rest = rest[o.end() :]
    if module != _LOGIN_MODULES[mechanism]:
        raise ValueError(f"sasl.mechanism={mechanism} logs in with {_LOGIN_MODULES[mechanism]}, not {module}")
    missing = [o for o in ("username", "password") if not options.get(o)]
    if missing:
        raise ValueError(f"the login module needs {' and '.join(missing)}")
    return options["username"], options["password"]


def jaas_line(mechanism: str, username: str, password: str) -> str:
    """The JAAS line Kafka expects for a SASL login (e.g. from an Airflow connection's login and password)."""

    def quote(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

    module = _LOGIN_MODULES.get(mechanism.strip().upper(), _LOGIN_MODULES["PLAIN"])
    return f"{module} required username={quote(username)} password={quote(password)};"
