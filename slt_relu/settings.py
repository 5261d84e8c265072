"""Typed experiment settings: one pydantic schema per kind, the only place its keys live.

Why pydantic (v2) rather than frozen dataclasses with a validator of our own: its models give,
from one declaration per key, the defaults, the type and range checks (``Field(ge=...)``), the
rejection of unknown keys (``extra="forbid"``), discriminated unions (``[truth] name = ...``,
``[sampler] name = ...`` pick a sub-schema), the error's location as a path of keys, and a
JSON dump of the resolved settings for the manifest; frozen models are hashable, so sampler
settings can be static arguments of ``jax.jit``.  This module adds what a config file needs on
top: lists read as tuples, every validation error turned into one line that names the dotted key
(``posterior.n: expected an integer >= 2, got 1``), and the settings tables of the site
(docs/settings.md) and ``slt-relu settings`` generated from the schemas (:func:`settings_rows`).
Parsing and the tables stay in one module, longer than most: both walk the same schema types (unions,
discriminators, nested sections), and a table is the parse's own view of a key.
"""
from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError



class ConfigError(ValueError):
    """A config or command-line mistake; str(err) is one line naming the key (or argument) and
    what was expected.  The CLI prints it and exits with status 2 before computing anything."""


# the largest magnitude of a real setting that is a value or scale of the model (a weight, a bias, a prior's or
# the noise's scale, a radius, a length, a step size): DSLT's values are O(1), and products of a few such values
# stay far inside float32's range, so losses, Fisher information, samplers and plots stay finite
SCALE_BOUND = 1e4


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
            candidates = [m for m in _models_in(info.annotation) if _tag_of(m) == part]
            if candidates:
                model = candidates[0]
                continue
        if model is None or part not in model.model_fields:
            if info is not None and get_origin(_strip(info.annotation)) in (Union, types.UnionType) and (
                    not _models_in(info.annotation)):
                continue                              # a member label of a plain union (e.g. 'constrained-float')
            clean.append(part)
            model = None
            continue
        clean.append(part)
        info = model.model_fields[part]
        models = _models_in(info.annotation)
        tagged = bool(models) and _tagged(info)
        model = models[0] if len(models) == 1 else None
    return clean, info, model


def _strip(annotation):
    """Optional[X] -> X (as a union when X is one)."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def _models_in(annotation):
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in get_args(annotation) for m in _models_in(a)]


def _tagged(info) -> bool:
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


def _tag_field(model) -> str | None:
    return next((f for f in TAG_FIELDS if f in model.model_fields
                 and get_origin(model.model_fields[f].annotation) is Literal), None)


def _tag_of(model):
    field = _tag_field(model)
    return get_args(model.model_fields[field].annotation)[0] if field else None


def _describe(value) -> str:
    text = repr(list(value) if isinstance(value, tuple) else value)
    return text if len(text) < 60 else text[:57] + "..."


def _lookup(data, loc):
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
        value = _lookup(data, loc)
        if kind == "missing":
            kind = "wrong_length"
    if kind == "value_error" and not isinstance(e.get("ctx", {}).get("error"), ConfigError):
        msg = re.sub(r"^Value error, ", "", e["msg"])
        m = re.match(r"^([\w\[\]\.]+): (.*)$", msg)
        if m:                                         # "key: expected ..." raised by a model validator
            return _join(prefix, dotted(loc), m.group(1)) + ": " + m.group(2)
        return f"{_join(prefix, dotted(loc))}: {msg}"
    key = _join(prefix, dotted(loc))
    if kind == "extra_forbidden":
        parent = _field_path(schema, e["loc"][:-1])[2] if len(e["loc"]) > 1 else schema
        known = ", ".join(sorted(parent.model_fields)) if parent is not None else "none"
        return f"{key}: unknown key; expected one of {known}"
    if kind == "union_tag_invalid":
        return f"{_join(key, e['ctx']['discriminator'].strip(chr(39)))}: expected one of " \
               f"{e['ctx']['expected_tags']}, got {_describe(e['ctx']['tag'])}"
    if kind == "union_tag_not_found":
        return f"{key}: missing {e['ctx']['discriminator']}; expected a table with it"
    expected = expected_text(info) if info is not None else e["msg"]
    if kind == "missing":
        return f"{key}: missing; expected {expected}"
    return f"{key}: expected {expected}, got {_describe(value)}"


def _join(*parts) -> str:
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
# documentation


class TaggedTable(typing.NamedTuple):
    """A discriminated union of a schema (a table whose tag picks its keys): its dotted key, its tag
    field, the tags of its alternatives, and the tag of its default table (None when it has none)."""

    key: str
    tag_field: str
    tags: tuple
    default: str | None


def unions(schema: type[BaseModel], prefix: str = "") -> list[TaggedTable]:
    """The discriminated unions of a schema outside arrays of tables (``truth``, ``inputs``,
    ``sampler``, ``compare``; nested tables included), in the order of its keys."""
    out = []
    for name, info in schema.model_fields.items():
        key, models = _join(prefix, name), _models_in(info.annotation)
        if not models or get_origin(info.annotation) is tuple:
            continue
        if _tagged(info) or len(models) > 1:
            default = _tag_of(type(info.default)) if isinstance(info.default, BaseModel) else None
            out.append(TaggedTable(key, _tag_field(models[0]), tuple(_tag_of(m) for m in models), default))
        else:
            out += unions(models[0], key)
    return out


def choices(schema: type[BaseModel]) -> list[TaggedTable]:
    """The unions whose schema picks a default alternative (a posterior's ``[sampler]``: NUTS): the
    choices ``slt-relu settings KIND`` shows one alternative of (``--sampler`` picks another)."""
    return [u for u in unions(schema) if u.default is not None]


def chosen(schema: type[BaseModel], settings: BaseModel | None = None, data: dict | None = None) -> dict[str, str]:
    """{union key: tag} of the alternatives a config selects: from its validated ``settings`` (defaults
    and validators applied), else from its raw ``data`` (an invalid config), else the schema's defaults."""
    out = {}
    for u in unions(schema):
        if settings is not None:
            value = settings
            for part in u.key.split("."):
                value = getattr(value, part, None)
            tag = _tag_of(type(value)) if isinstance(value, BaseModel) else None
        else:
            table = _lookup(data or {}, u.key.split("."))
            tag = table.get(u.tag_field, u.default) if isinstance(table, dict) else u.default
        if tag in u.tags:
            out[u.key] = tag
    return out


def settings_rows(schema: type[BaseModel], prefix: str = "", choose: dict | None = None,
                  _shown: dict | None = None) -> list[tuple[str, str, str, str]]:
    """(dotted key, expected value, default, description) for every key of a schema, each key once,
    tables expanded (``key[]`` for arrays of tables).  A discriminated union lists its tag's values, then
    the keys of the alternative ``choose`` names for it ({union key: tag}), or none of them when ``choose``
    maps it to None (they are listed per alternative elsewhere, :func:`settings_sections`), or else every
    alternative's keys: those all share once, each other key once with the alternatives it belongs to
    ("(name = 'a' or 'b')"; a cell that differs between them lists each value with its alternatives).  A
    union with the alternatives of one listed before (``[compare]`` after ``[sampler]``) refers to it."""
    choose = choose or {}
    shown = {} if _shown is None else _shown        # a union's alternatives -> the key they are listed under
    rows = []
    for name, info in schema.model_fields.items():
        key = _join(prefix, name)
        ann = info.annotation
        if _fixed_tag(info):
            continue                                   # e.g. [sampler] name of a table that is one sampler
        models = _models_in(ann)
        array = get_origin(ann) is tuple and bool(models)
        if array:
            key += "[]"
        if models and (_tagged(info) or len(models) > 1):
            rows += _union_rows(key, info, models, choose, shown)
            continue
        if models:
            rows.append((key, "array of tables" if array else "table", "", info.description or ""))
            rows += settings_rows(models[0], key, choose, shown)
            continue
        default = "required" if info.is_required() else _default_text(info.default)
        rows.append((key, expected_text(info), default, info.description or ""))
    return list(dict.fromkeys(rows))


def _union_rows(key, info, models, choose, shown):
    tag_field = _tag_field(models[0])
    tag_key, tags = f"{key}.{tag_field}", [_tag_of(m) for m in models]
    group = frozenset(models)
    default = ("required" if info.is_required() else
               _default_text(_tag_of(type(info.default))) if isinstance(info.default, BaseModel) else "")
    desc = info.description or ""

    def tag_row(note):
        return (tag_key, "one of " + ", ".join(map(repr, tags)), default, f"{desc}; {note}" if desc else note)

    if key in choose:
        shown.setdefault(group, key)
        if choose[key] is None:
            return [tag_row(f"the keys of each {tag_field}: the tables that follow")]
        model = models[tags.index(choose[key])]
        return [tag_row(f"the keys that follow are those of {tag_field} = {choose[key]!r}")] + [
            r for r in settings_rows(model, key, choose, shown) if r[0] != tag_key]
    if group in shown:
        return [tag_row(f"its other keys are those of [{shown[group]}] for that {tag_field}")]
    shown[group] = key
    per_model = [[r for r in settings_rows(m, key, choose, shown) if r[0] != tag_key] for m in models]
    common = set.intersection(*(set(rs) for rs in per_model))
    rows = [(tag_key, "one of " + ", ".join(map(repr, tags)), default, desc)]
    rows += [r for r in per_model[0] if r in common]
    variants: dict[str, list] = {}                     # key -> [(tag, (expected, default, description))]
    for tag, rs in zip(tags, per_model):
        for r in rs:
            if r not in common:
                variants.setdefault(r[0], []).append((tag, r[1:]))
    rows += [_merged(k, vs, tag_field) for k, vs in variants.items()]
    return rows


def _merged(key, variants, tag_field):
    """One row of a key that some alternatives of a union have: each cell once if they agree on it, else
    each value with the alternatives that have it."""
    def when(tags):
        return f"{tag_field} = " + " or ".join(repr(t) for t in tags)

    cells = []
    for i in range(3):
        values: dict[str, list] = {}
        for tag, row in variants:
            values.setdefault(row[i], []).append(tag)
        cells.append(next(iter(values)) if len(values) == 1 else
                     "; ".join(f"{v or 'unset'} ({when(ts)})" for v, ts in values.items()))
    expected, default, desc = cells
    if len({row[2] for _, row in variants}) == 1:      # one description: the condition once, after it
        everyone = f"({when([t for t, _ in variants])})"
        desc = f"{desc} {everyone}" if desc else everyone
    return key, expected, default, desc


def _fixed_tag(info) -> bool:
    """A Literal field with one value and that value as its default: nothing to set."""
    return (get_origin(info.annotation) is Literal and len(get_args(info.annotation)) == 1
            and not info.is_required())


def _default_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, BaseModel) or value is None:
        return "" if value is None else "(table)"
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, float) and value == int(value) and abs(value) < 1e15:
        return repr(value)
    return repr(value).replace("'", '"')


def settings_sections(schema: type[BaseModel]) -> list[tuple[str, list[tuple[str, str, str, str]]]]:
    """A schema's keys as (title, rows) sections, every alternative of every choice once: the keys
    outside the choices (a choice's tag row only), then one section per alternative of each choice
    (a posterior's ``[sampler] name = "smc"``: its ``sampler.*`` keys).  The site's settings page."""
    picks = choices(schema)
    sections = [("", settings_rows(schema, choose={u.key: None for u in picks}))]
    for u in picks:
        for tag, model in zip(u.tags, _models_in(schema_field(schema, u.key).annotation)):
            title = f'[{u.key}] {u.tag_field} = "{tag}"' + (" (the default)" if tag == u.default else "")
            sections.append((title, [r for r in settings_rows(model, u.key) if r[0] != f"{u.key}.{u.tag_field}"]))
    return sections


def schema_field(schema: type[BaseModel], key: str):
    """The FieldInfo of a dotted key outside arrays and unions (``posterior.n``, ``sampler``)."""
    *tables, last = key.split(".")
    for part in tables:
        schema = _models_in(schema.model_fields[part].annotation)[0]
    return schema.model_fields[last]


def settings_table(schema: type[BaseModel], choose: dict | None = None, rows=None) -> str:
    """A markdown table of a schema's keys (:func:`settings_rows`; the site's settings page,
    docs/settings.md, is generated from these)."""
    lines = ["| key | expected | default | meaning |", "|---|---|---|---|"]
    for key, expected, default, desc in rows if rows is not None else settings_rows(schema, choose=choose):
        cells = [f"`{key}`", expected, default, desc]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)


def settings_text(schema: type[BaseModel], choose: dict | None = None, rows=None, width: int = 100) -> str:
    """The keys of :func:`settings_rows` as plain text for a terminal: a line per key with what it expects
    and its default, its meaning indented below."""
    import textwrap

    lines = []
    for key, expected, default, desc in rows if rows is not None else settings_rows(schema, choose=choose):
        head = f"{key}: {expected}" + ("; required" if default == "required" else
                                       f"; default {default}" if default else "")
        lines += textwrap.wrap(head, width, subsequent_indent=" " * 8, break_on_hyphens=False)
        lines += textwrap.wrap(desc, width, initial_indent=" " * 4, subsequent_indent=" " * 4, break_on_hyphens=False)
    return "\n".join(lines)


def document_fields(cls: type[BaseModel]) -> type[BaseModel]:
    """Class decorator: add an ``Attributes:`` section (Google style, as Sphinx's napoleon reads it)
    to a settings class's docstring, one entry per field in the words of ``slt-relu settings`` (its
    description, expected value and default), before a ``References:`` section if there is one.  The
    fields' declarations stay the one place their meaning is written."""
    entries = []
    for name, info in cls.model_fields.items():
        if _fixed_tag(info):
            text = f"fixed to ``{info.default!r}``, the tag that names these settings."
        else:
            default = "required" if info.is_required() else (_default_text(info.default) or "None")
            text = f"{info.description or ''} ({expected_text(info)}; default {default})".strip()
        entries.append(f"    {name}: {text}")
    doc = inspect.cleandoc(cls.__doc__ or "")
    head, sep, refs = doc.partition("\nReferences:")
    cls.__doc__ = head.rstrip() + "\n\nAttributes:\n" + "\n".join(entries) + ("\n" + sep + refs if sep else "") + "\n"
    return cls
