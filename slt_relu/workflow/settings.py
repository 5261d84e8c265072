"""The schemas of config tables: one pydantic model per table, the only place a config's keys live.

Why pydantic (v2) for the configs rather than a validator of our own: its models give, from one declaration
per key, the defaults, the type and range checks (``Field(ge=...)``), the rejection of unknown keys
(``extra="forbid"``), discriminated unions (``[truth] name = ...``, ``[sampler] name = ...`` pick a
sub-schema), the error's location as a path of keys, and a JSON dump of the resolved settings for the
manifest.  This module adds what a config file needs on top: lists read as tuples, every validation error
turned into one line that names the dotted key (``posterior.n: expected an integer >= 2, got 1``), and
:func:`section_of`, the schema of a library settings type (a sampler's, the learning coefficient's), built
from its fields so that their defaults, bounds and meanings are written once, in the library.  The settings
tables of the site and of ``slt-relu settings`` walk the same schemas (``settings_tables``).
"""
from __future__ import annotations

import dataclasses
import re
import types
import typing
from typing import Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from .._validate import SCALE_BOUND, settings_fields  # noqa: F401  (SCALE_BOUND: the schemas' bound, from the library)

__all__ = ["ConfigError", "Section", "SettingsSection", "dotted", "expected_text", "is_tagged", "parse", "section_of",
           "tuples", "type_text"]


class ConfigError(ValueError):
    """A config or command-line mistake; str(err) is one line naming the key (or argument) and
    what was expected.  The CLI prints it and exits with status 2 before computing anything."""




class Section(BaseModel):
    """A table of a config: unknown keys refused, no coercion (``"3"`` is not 3, ``true`` is not
    1), no infinities or NaN, frozen (hashable, so usable as a static ``jax.jit`` argument)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def tuples(value):
    """TOML arrays as tuples (strict tuple fields; hashable settings), recursively."""
    if isinstance(value, dict):
        return {k: tuples(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return tuple(tuples(v) for v in value)
    return value


def parse(schema: type[BaseModel], data: dict, prefix: str = ""):
    """Validate ``data`` against ``schema``; a mistake becomes a one-line :class:`ConfigError`
    naming the dotted key (``prefix`` is prepended to it)."""
    try:
        return schema.model_validate(tuples(data))
    except ValidationError as err:
        raise ConfigError(_one_line(schema, err.errors()[0], prefix, tuples(data))) from None


def dotted(loc) -> str:
    """('cases', 0, 'sgld', 'num_steps') -> 'cases[0].sgld.num_steps'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _field_path(schema, loc):
    """Walk loc through the schema: (the loc without the parts pydantic adds for unions, the last
    field's info, the model holding it)."""
    model, info, clean = schema, None, []
    tagged = False
    for part in loc:
        if isinstance(part, int):
            clean.append(part)
            continue
        if tagged:                                    # the tag of a discriminated union's alternative
            tagged = False
            candidates = [m for m in models_in(info.annotation) if tag_of(m) == part]
            if candidates:
                model = candidates[0]
                continue
        if model is None or part not in model.model_fields:
            if info is not None and get_origin(_strip(info.annotation)) in (Union, types.UnionType) and (
                    not models_in(info.annotation)):
                continue                              # a member label of a plain union (e.g. 'constrained-float')
            clean.append(part)
            model = None
            continue
        clean.append(part)
        info = model.model_fields[part]
        models = models_in(info.annotation)
        tagged = bool(models) and is_tagged(info)
        model = models[0] if len(models) == 1 else None
    return clean, info, model


def _strip(annotation):
    """Optional[X] -> X (as a union when X is one)."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def models_in(annotation):
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in get_args(annotation) for m in models_in(a)]


def is_tagged(info) -> bool:
    """Whether a field is a discriminated union (possibly optional): its loc carries the tag."""
    if info.discriminator is not None or any(getattr(m, "discriminator", None) for m in info.metadata):
        return True
    return _has_discriminator(info.annotation)


def _has_discriminator(annotation) -> bool:
    if get_origin(annotation) is typing.Annotated:
        _, *meta = get_args(annotation)
        if any(getattr(m, "discriminator", None) for m in meta):
            return True
    return any(_has_discriminator(a) for a in get_args(annotation))


TAG_FIELDS = ("name", "source", "distribution", "model")


def tag_field(model) -> str | None:
    return next((f for f in TAG_FIELDS if f in model.model_fields
                 and get_origin(model.model_fields[f].annotation) is Literal), None)


def tag_of(model):
    if getattr(model, "__tag__", None) is not None:       # an alternative tagged by a discriminator function
        return model.__tag__
    field = tag_field(model)
    return get_args(model.model_fields[field].annotation)[0] if field else None


def _describe(value) -> str:
    text = repr(list(value) if isinstance(value, tuple) else value)
    return text if len(text) < 60 else text[:57] + "..."


def lookup(data, loc):
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _one_line(schema, e: dict, prefix: str, data=None) -> str:
    loc, info, model = _field_path(schema, e["loc"])
    kind, value = e["type"], e.get("input")
    while loc and isinstance(loc[-1], int) and kind != "value_error":   # an item of a list: name the list
        loc = loc[:-1]
        value = lookup(data, loc)
        if kind == "missing":
            kind = "wrong_length"
    if kind == "value_error" and not isinstance(e.get("ctx", {}).get("error"), ConfigError):
        msg = re.sub(r"^Value error, ", "", e["msg"])
        m = re.match(r"^([\w\[\]\.]+): (.*)$", msg)
        if m:                                         # "key: expected ..." raised by a model validator
            return join_keys(prefix, dotted(loc), m.group(1)) + ": " + m.group(2)
        return f"{join_keys(prefix, dotted(loc))}: {msg}"
    key = join_keys(prefix, dotted(loc))
    if kind == "extra_forbidden":
        parent = _field_path(schema, e["loc"][:-1])[2] if len(e["loc"]) > 1 else schema
        known = ", ".join(sorted(parent.model_fields)) if parent is not None else "none"
        return f"{key}: unknown key; expected one of {known}"
    if kind == "union_tag_invalid":
        if e["ctx"]["discriminator"].endswith("()"):          # a discriminator function: [truth]'s name
            return f"{join_keys(key, 'name')}: expected one of {e['ctx']['expected_tags']} (inline: w, b, q, c in the "\
                   f"table), got {_describe(e['ctx']['tag'])}"
        return f"{join_keys(key, e['ctx']['discriminator'].strip(chr(39)))}: expected one of " \
               f"{e['ctx']['expected_tags']}, got {_describe(e['ctx']['tag'])}"
    if kind == "union_tag_not_found" and e["ctx"]["discriminator"].endswith("()"):
        return f"{key}: missing name; expected a registered example's name, 'file.py:function', or w (an inline truth)"
    if kind == "union_tag_not_found":
        return f"{key}: missing {e['ctx']['discriminator']}; expected a table with it"
    expected = expected_text(info) if info is not None else e["msg"]
    if kind == "missing":
        return f"{key}: missing; expected {expected}"
    return f"{key}: expected {expected}, got {_describe(value)}"


def join_keys(*parts) -> str:
    return ".".join(p for p in parts if p)


_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
_PLURAL = {"an integer": "integers", "a number": "numbers", "a string": "strings", "a [table]": "tables",
           "true or false": "booleans"}


def type_text(annotation) -> str:
    """Words for a type: 'an integer', 'a list of numbers in [0, 1]', "one of 'a', 'b'", 'a [table]'."""
    origin = get_origin(annotation)
    if annotation in _WORDS:
        return _WORDS[annotation]
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(annotation))
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if all(isinstance(a, type) and issubclass(a, BaseModel) for a in args):
            return "a [table]"
        return " or ".join(type_text(a) for a in args)
    if origin is tuple:
        args = get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            inner = type_text(args[0])
            for one, many in _PLURAL.items():
                if inner.startswith(one):
                    inner = many + inner[len(one):]
            if inner.startswith("a list of"):
                inner = "lists of" + inner[len("a list of"):]
            if inner.startswith("one of "):
                inner = inner[len("one of "):]
            return f"a list of {inner}"
        if len(set(args)) == 1:
            return f"a list of {len(args)} " + _PLURAL.get(type_text(args[0]), type_text(args[0]))
        return f"a list of {len(args)}: " + ", ".join(type_text(a) for a in args)
    if origin is dict or annotation is dict:
        return "a table"
    if origin is typing.Annotated:
        inner, *meta = get_args(annotation)
        return _with_bounds(type_text(inner), meta)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "a [table]"
    return getattr(annotation, "__name__", str(annotation))


def _with_bounds(text: str, metadata) -> str:
    low = high = low_open = high_open = None
    for m in metadata:
        for meta in getattr(m, "metadata", [m]):       # a FieldInfo inside Annotated carries its own
            if getattr(meta, "ge", None) is not None:
                low = meta.ge
            if getattr(meta, "le", None) is not None:
                high = meta.le
            if getattr(meta, "gt", None) is not None:
                low_open = meta.gt
            if getattr(meta, "lt", None) is not None:
                high_open = meta.lt
            if getattr(meta, "min_length", None):
                n = meta.min_length
                text = text.replace("a list of", "a non-empty list of" if n == 1 else f"a list of at least {n}", 1)
    if low_open is not None and high_open is not None:
        return text + f" in ({low_open}, {high_open})"
    if low_open is not None and high is not None:
        return text + f" in ({low_open}, {high}]"
    if low is not None and high_open is not None:
        return text + f" in [{low}, {high_open})"
    if low_open is not None:
        text += f" > {low_open}"
    if high_open is not None:
        text += f" < {high_open}"
    if low is not None and high is not None:
        text += f" in [{low}, {high}]"
    elif low is not None:
        text += f" >= {low}"
    elif high is not None:
        text += f" <= {high}"
    return text


def expected_text(info) -> str:
    """The expected value of a field in words, with its bounds: 'an integer in [3, 4001]' (or the field's
    own words, ``json_schema_extra={"expected": ...}``, where a pattern says it better)."""
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    if "expected" in extra:
        return extra["expected"]
    text = _with_bounds(type_text(info.annotation), info.metadata)
    for meta in info.metadata:
        if getattr(meta, "max_length", None) is not None and "string" in text:
            text += f" of at most {meta.max_length} characters"
    return text


# ----------------------------------------------------------------------------------------
# the schema of a library settings type


class SettingsSection(Section):
    """The schema of a library settings type (:func:`section_of`): its keys, checked strictly, then by the type
    itself (its checks between keys); :meth:`build` gives the library's settings."""

    settings_type: typing.ClassVar[type]

    def build(self):
        """The library's settings of this table (a kind's extra keys left out)."""
        return self.settings_type(**{f.name: getattr(self, f.name) for f in settings_fields(self.settings_type)})

    @model_validator(mode="after")
    def _checked_by_the_library(self):
        self.build()                               # its checks between keys: "num_burnin: expected ..." errors
        return self


def section_of(settings_type: type, name: str | None = None) -> type[SettingsSection]:
    """The config schema of a library settings type (``slt_relu.sampling.settings``, ``LLCSettings``): a
    :class:`SettingsSection` with the same keys, defaults, bounds and descriptions, read from the type's fields;
    a kind subclasses it to change a default or add keys.

    Args:
        settings_type: a settings type made by ``slt_relu.sampling.settings_type``.
        name: the schema's class name (default: the type's).

    Returns:
        the schema class, with ``build()`` -> an instance of settings_type.
    """
    hints = typing.get_type_hints(settings_type)
    fields = {}
    for f in settings_fields(settings_type):
        bounds = {k: f.metadata[k] for k in ("ge", "gt", "le", "lt") if f.metadata.get(k) is not None}
        default = ... if f.default is dataclasses.MISSING else f.default
        fields[f.name] = (hints[f.name], Field(default, description=f.metadata.get("description") or None, **bounds))
    schema = create_model(name or settings_type.__name__, __base__=SettingsSection, __doc__=settings_type.__doc__,
                          __module__=__name__, **fields)
    schema.settings_type = settings_type
    return schema

