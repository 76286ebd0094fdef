"""Secrets written the many ways real text carries them, for the redaction tests.

:func:`plant` builds one :class:`Planted` from a random generator: a form (an ``.env`` line, a
compose file, escaped JSON in a log, a command-line flag, base64 ...), a key name in a random case
style, and a fresh random value, so no test can pass by knowing the value. ``where`` says which
part of a host message carries it (``text``: message content, ``arguments``: a tool call's JSON
arguments, ``result``: a tool result), and ``secrets`` lists every string that must not survive
(the value, and for an encoded or hidden form the form as written too).
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Planted:
    form: str
    where: str
    text: str
    secrets: tuple[str, ...]
    keep: str = ""  # a name that must stay readable ("" for forms that have none)


PASSWORD_WORDS = (
    ("password",),
    ("db", "password"),
    ("postgres", "password"),
    ("user", "password"),
    ("smtp", "pass"),
    ("pg", "password"),
    ("admin", "passwd"),
    ("ssh", "passphrase"),
)
KEY_WORDS = (
    ("api", "key"),
    ("openai", "api", "key"),
    ("auth", "token"),
    ("access", "token"),
    ("client", "secret"),
    ("github", "token"),
    ("jwt", "secret"),
    ("secret", "key"),
    ("webhook", "secret"),
    ("x", "api", "key"),
)


def name_in(style: str, words: tuple[str, ...]) -> str:
    """``words`` as a key name in one of the case styles configuration uses."""
    if style == "upper_snake":
        return "_".join(w.upper() for w in words)
    if style == "snake":
        return "_".join(words)
    if style == "camel":
        return words[0] + "".join(w.capitalize() for w in words[1:])
    if style == "pascal":
        return "".join(w.capitalize() for w in words)
    if style == "kebab":
        return "-".join(words)
    if style == "flat_upper":
        return "".join(w.upper() for w in words)
    raise ValueError(style)


STYLES = ("upper_snake", "snake", "camel", "pascal", "kebab", "flat_upper")


def value(rng: random.Random) -> str:
    """A random value that occurs nowhere else (letters and digits around a few symbols)."""
    core = "".join(
        rng.choice(string.ascii_letters + string.digits) for _ in range(rng.randint(12, 20))
    )
    return core[:6] + rng.choice(["", "!", "%", "^", "*", "+", "-", "_"]) + core[6:]


def shaped(rng: random.Random) -> str:
    """A provider token: found by its shape, not by a name."""
    tail = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))
    return rng.choice(["sk-proj-", "ghp_", "glpat-", "sk-ant-api03-"]) + tail


def _words(rng: random.Random) -> tuple[str, ...]:
    return rng.choice(PASSWORD_WORDS + KEY_WORDS)


def _name(rng: random.Random, styles: tuple[str, ...] = STYLES) -> str:
    return name_in(rng.choice(styles), _words(rng))


def _env(rng: random.Random) -> Planted:
    name, secret = _name(rng, ("upper_snake", "flat_upper")), value(rng)
    line = f"{rng.choice(['', 'export '])}{name}={secret}"
    return Planted("env", "text", f"my .env:\nDEBUG=1\n{line}\nPORT=8080", (secret,), name)


def _yaml(rng: random.Random) -> Planted:
    name, secret = _name(rng), value(rng)
    shown = rng.choice([secret, f'"{secret}"', f"'{secret}'"])
    return Planted(
        "yaml",
        "result",
        f"services:\n  db:\n    environment:\n      {name}: {shown}\n      TZ: UTC",
        (secret,),
        name,
    )


def _ini(rng: random.Random) -> Planted:
    name, secret = _name(rng, ("snake", "kebab")), value(rng)
    return Planted(
        "ini", "result", f"[database]\nhost = db.internal\n{name} = {secret}\n", (secret,), name
    )


def _shell_inline(rng: random.Random) -> Planted:
    name, secret = _name(rng, ("upper_snake", "flat_upper")), value(rng)
    return Planted(
        "shell",
        "arguments",
        json.dumps({"command": f"{name}={secret} psql -h db -c 'select 1'"}),
        (secret,),
        name,
    )


def _nest(rng: random.Random, inner: object) -> object:
    for _ in range(rng.randint(0, 4)):
        inner = rng.choice(
            [{"env": inner}, {"config": {"values": inner}}, [inner], {"spec": [{"x": 1}, inner]}]
        )
    return inner


def _json_deep(rng: random.Random) -> Planted:
    name, secret = _name(rng), value(rng)
    return Planted(
        "json_deep",
        "arguments",
        json.dumps(_nest(rng, {name: secret, "port": 5432})),
        (secret,),
        name,
    )


def _json_in_string(rng: random.Random) -> Planted:
    name, secret = _name(rng), value(rng)
    inner: object = {name: secret}
    for _ in range(rng.randint(1, 3)):
        inner = {"body": json.dumps(inner)}
    return Planted("json_in_string", "arguments", json.dumps(inner), (secret,), name)


def _escaped_json(rng: random.Random) -> Planted:
    name, secret = _name(rng), value(rng)
    text = json.dumps({name: secret, "user": "app"})
    for _ in range(rng.randint(1, 2)):
        text = json.dumps(text)[1:-1]
    return Planted(
        "escaped_json",
        "result",
        f"2026-11-02 ERROR request body={text} status=500",
        (secret,),
        name,
    )


def _url(rng: random.Random) -> Planted:
    secret = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(16))
    user = rng.choice(["", "app", "default"])
    scheme = rng.choice(["postgres", "redis", "mysql", "amqp", "mongodb+srv"])
    return Planted(
        "url",
        "text",
        f"connect with {scheme}://{user}:{secret}@cache.internal:6379/0 please",
        (secret,),
    )


def _flag(rng: random.Random) -> Planted:
    name, secret = name_in("kebab", _words(rng)), value(rng)
    shown = rng.choice(
        [f"--{name} {secret}", f"--{name}={secret}", f'--{name} "{secret}"', f"--{name}='{secret}'"]
    )
    return Planted(
        "flag",
        "arguments",
        json.dumps({"command": f"deploy-tool {shown} --region eu"}),
        (secret,),
        name,
    )


def _name_value(rng: random.Random) -> Planted:
    name, secret = _name(rng, ("upper_snake",)), value(rng)
    pair = rng.choice(
        [
            {"name": name, "value": secret},
            {"Name": name, "Value": secret},
            {"key": name, "value": secret},
        ]
    )
    return Planted(
        "name_value",
        "arguments",
        json.dumps({"containers": [{"env": [{"name": "TZ", "value": "UTC"}, pair]}]}),
        (secret,),
        name,
    )


def _argv(rng: random.Random) -> Planted:
    name, secret = name_in("kebab", _words(rng)), value(rng)
    return Planted(
        "argv",
        "arguments",
        json.dumps({"argv": ["tool", f"--{name}", secret, "--verbose"]}),
        (secret,),
        f"--{name}",
    )


def _key_as_key(rng: random.Random) -> Planted:
    token = shaped(rng)
    return Planted(
        "key_as_json_key", "arguments", json.dumps({"tokens": {token: {"scope": "repo"}}}), (token,)
    )


def _split(rng: random.Random) -> Planted:
    token = shaped(rng)
    cut = rng.randint(len(token) // 3, len(token) - 10)
    return Planted(
        "split",
        "arguments",
        json.dumps({"first": token[:cut], "second": token[cut:]}),
        (token[:cut], token[cut:]),
    )


def _hidden(rng: random.Random) -> Planted:
    hidden = rng.choice(["\u200b", "\u200c", "\u2060", "\ufeff", "\u00ad"])
    if rng.random() < 0.5:
        token = shaped(rng)
        at = rng.randint(3, 10)
        written = token[:at] + hidden + token[at:]
        return Planted(
            "hidden_in_token", "text", f"the token is {written} ok", (written, token[at + 2 :])
        )
    secret = value(rng)
    name = "pass" + hidden + "word"
    return Planted("hidden_in_name", "text", f"{name}={secret}", (secret,))


def _lookalike(rng: random.Random) -> Planted:
    secret = value(rng)
    name = rng.choice(
        ["p\u0430ssword", "passw\u043erd", "t\u043eken_secret", "\u0430pi_key", "ＰＡＳＳＷＯＲＤ"]
    )
    return Planted("lookalike", "text", f"{name}: {secret}", (secret,))


def _base64(rng: random.Random) -> Planted:
    inner = rng.choice([f"{_name(rng, ('upper_snake',))}={value(rng)}", shaped(rng)])
    encoded = base64.b64encode(inner.encode()).decode()
    return Planted(
        "base64",
        "result",
        f"$ echo {encoded} | base64 -d\n(decoded)",
        (encoded, inner.split("=")[-1]),
    )


def _xml(rng: random.Random) -> Planted:
    secret = value(rng)
    tag = rng.choice(["password", "apiKey", "secret"])
    return Planted(
        "xml", "result", f"<server><id>nexus</id><{tag}>{secret}</{tag}></server>", (secret,)
    )


def _curl_user(rng: random.Random) -> Planted:
    secret = value(rng).replace(":", "")
    return Planted(
        "curl_user",
        "arguments",
        json.dumps({"command": f"curl -u admin:{secret} https://ci.internal/api"}),
        (secret,),
    )


FORMS: dict[str, Callable[[random.Random], Planted]] = {
    "env": _env,
    "yaml": _yaml,
    "ini": _ini,
    "shell": _shell_inline,
    "json_deep": _json_deep,
    "json_in_string": _json_in_string,
    "escaped_json": _escaped_json,
    "url": _url,
    "flag": _flag,
    "name_value": _name_value,
    "argv": _argv,
    "key_as_json_key": _key_as_key,
    "split": _split,
    "hidden": _hidden,
    "lookalike": _lookalike,
    "base64": _base64,
    "xml": _xml,
    "curl_user": _curl_user,
}


def plant(rng: random.Random, form: str | None = None) -> Planted:
    return FORMS[form or rng.choice(sorted(FORMS))](rng)


def leaked(planted: Planted, text: str) -> list[str]:
    """The planted strings still in ``text`` (as written, or JSON-escaped once or twice)."""
    out = []
    for secret in planted.secrets:
        once = json.dumps(secret)[1:-1]
        twice = json.dumps(once)[1:-1]
        if secret in text or once in text or twice in text:
            out.append(secret)
    return out
