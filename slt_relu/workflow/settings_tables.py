"""The settings tables of the site (docs/settings.md) and of ``slt-relu settings``, generated from the config
schemas (``slt_relu.workflow.settings``): every key with what it expects, its default and its meaning; a
discriminated union's alternatives each with its keys.  A table is the parse's own view of a key, so the two
walk the same schema types (unions, discriminators, nested sections).
"""
from __future__ import annotations

import inspect
import typing
from typing import Literal, get_args, get_origin

from pydantic import BaseModel

from .settings import expected_text, is_tagged, join_keys, lookup, models_in, tag_field, tag_of

__all__ = ["TaggedTable", "choices", "chosen", "document_fields", "fixed_tag", "schema_field", "settings_rows",
           "settings_sections", "settings_table", "settings_text", "unions"]



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
        key, models = join_keys(prefix, name), models_in(info.annotation)
        if not models or get_origin(info.annotation) is tuple:
            continue
        if is_tagged(info) or len(models) > 1:
            default = tag_of(type(info.default)) if isinstance(info.default, BaseModel) else None
            out.append(TaggedTable(key, tag_field(models[0]), tuple(tag_of(m) for m in models), default))
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
            tag = tag_of(type(value)) if isinstance(value, BaseModel) else None
        else:
            table = lookup(data or {}, u.key.split("."))
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
        key = join_keys(prefix, name)
        ann = info.annotation
        if fixed_tag(info):
            continue                                   # e.g. [sampler] name of a table that is one sampler
        models = models_in(ann)
        array = get_origin(ann) is tuple and bool(models)
        if array:
            key += "[]"
        if models and (is_tagged(info) or len(models) > 1):
            rows += _union_rows(key, info, models, choose, shown)
            continue
        if models:
            rows.append((key, "array of tables" if array else "table", "", info.description or ""))
            rows += settings_rows(models[0], key, choose, shown)
            continue
        default = "required" if info.is_required() else default_text(info.default)
        rows.append((key, expected_text(info), default, info.description or ""))
    return list(dict.fromkeys(rows))


def _union_rows(key, info, models, choose, shown):
    field = tag_field(models[0])
    tag_key, tags = f"{key}.{field}", [tag_of(m) for m in models]
    group = frozenset(models)
    default = ("required" if info.is_required() else
               default_text(tag_of(type(info.default))) if isinstance(info.default, BaseModel) else "")
    desc = info.description or ""

    def tag_row(note):
        return (tag_key, "one of " + ", ".join(map(repr, tags)), default, f"{desc}; {note}" if desc else note)

    if key in choose:
        shown.setdefault(group, key)
        if choose[key] is None:
            return [tag_row(f"the keys of each {field}: the tables that follow")]
        model = models[tags.index(choose[key])]
        return [tag_row(f"the keys that follow are those of {field} = {choose[key]!r}")] + [
            r for r in settings_rows(model, key, choose, shown) if r[0] != tag_key]
    if group in shown:
        return [tag_row(f"its other keys are those of [{shown[group]}] for that {field}")]
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
    rows += [_merged(k, vs, field) for k, vs in variants.items()]
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


def fixed_tag(info) -> bool:
    """A Literal field with one value and that value as its default: nothing to set."""
    return (get_origin(info.annotation) is Literal and len(get_args(info.annotation)) == 1
            and not info.is_required())


def default_text(value) -> str:
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
        for tag, model in zip(u.tags, models_in(schema_field(schema, u.key).annotation)):
            title = f'[{u.key}] {u.tag_field} = "{tag}"' + (" (the default)" if tag == u.default else "")
            sections.append((title, [r for r in settings_rows(model, u.key) if r[0] != f"{u.key}.{u.tag_field}"]))
    return sections


def schema_field(schema: type[BaseModel], key: str):
    """The FieldInfo of a dotted key outside arrays and unions (``posterior.n``, ``sampler``)."""
    *tables, last = key.split(".")
    for part in tables:
        schema = models_in(schema.model_fields[part].annotation)[0]
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
        if fixed_tag(info):
            text = f"fixed to ``{info.default!r}``, the tag that names these settings."
        else:
            default = "required" if info.is_required() else (default_text(info.default) or "None")
            text = f"{info.description or ''} ({expected_text(info)}; default {default})".strip()
        entries.append(f"    {name}: {text}")
    doc = inspect.cleandoc(cls.__doc__ or "")
    head, sep, refs = doc.partition("\nReferences:")
    cls.__doc__ = head.rstrip() + "\n\nAttributes:\n" + "\n".join(entries) + ("\n" + sep + refs if sep else "") + "\n"
    return cls
