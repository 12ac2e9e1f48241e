"""Configuration files from the templates in bench/conf/ ({{name}} placeholders: nginx and
HAProxy configs are full of `$`, so string.Template would not do)."""
import re
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


def render(template, dest, **values):
    """Writes bench/conf/`template` to `dest` with every {{key}} replaced; an unknown key is an
    error, so a template and its caller cannot drift apart silently."""
    text = (CONF_DIR / template).read_text()

    def value(m):
        key = m.group(1)
        if key not in values:
            raise KeyError(f"{template}: no value for {{{{{key}}}}}")
        return str(values[key])

    Path(dest).write_text(re.sub(r"\{\{(\w+)\}\}", value, text))
    return Path(dest)
