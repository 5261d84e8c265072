"""Schema pieces every kind shares: the top-level keys, [truth], [inputs], and the samplers' tables.

``[truth]``: ``name`` picks a registered example (``slt_relu.truths``); its other keys are the
example's options, typed from the example function's signature (so ``t`` for ``dslt4_pt1``,
``m``, ``bias``, ``q``, ``c``, ``width`` for ``m_symmetric``); or the table holds a researcher's own truth, inline
(``w``, ``b``, ``q``, ``c``) or a function of theirs (``name = "file.py:function"``; ``truth_sources``).  ``[inputs]`` overrides the
example's input distribution; top-level ``sigma`` its noise.  The samplers' tables (``[sampler]``,
``[smc]``, ``[llc.sgld]``, ...) are the schemas of the library's settings types
(:func:`~slt_relu.workflow.settings.section_of`): ``NUTSSection`` ... ``LLCSection``, whose ``build()`` gives the
settings the library takes.
"""
from __future__ import annotations

import inspect
import typing
from typing import Annotated, Literal, NamedTuple, Union

from pydantic import AfterValidator, Discriminator, Field, Tag, create_model

from .. import truths
from ..posterior.llc import LLCSettings
from ..sampling import HMCSettings, NUTSSettings, SGLDSettings, SMCSettings
from .settings import SCALE_BOUND, ConfigError, Section, parse, section_of
from .truth_sources import FunctionTruth, InlineTruth, example_of_own, truth_tag

__all__ = ["Experiment", "Setup", "TruthExperiment", "case_example", "example_of", "require_float64",
           "require_increasing", "resolve_inputs", "resolve_setup"]

NUTSSection = section_of(NUTSSettings, "NUTSSection")
HMCSection = section_of(HMCSettings, "HMCSection")
SMCSection = section_of(SMCSettings, "SMCSection")
SGLDSection = section_of(SGLDSettings, "SGLDSection")
LLCSection = section_of(LLCSettings, "LLCSection")

DTYPES = ("float64", "float32")
NAME_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$"       # a plain file name: no separator, no leading dot
NAME_WORDS = "a plain file name (letters, digits, _ - ., at most 100 characters, not starting with a dot)"


# sizes an example takes from the config: nodes of an m-symmetric truth and of its model (DSLT's networks
# have a handful; 256 matches the widths of the fisher kind)
TRUTH_SIZE_BOUNDS = {"m": (1, 256), "width": (1, 256)}


def _zero_or_resolved(value: float) -> float:
    """A real option is 0 or at least 1 / SCALE_BOUND in magnitude: a weight of 1e-300 is neither zero
    (the truth stays minimal) nor anything its squares can resolve (they underflow)."""
    if 0 < abs(value) < 1 / SCALE_BOUND:
        raise ValueError(f"expected 0 or a magnitude in [{1 / SCALE_BOUND}, {SCALE_BOUND}], got {value!r}")
    return value


def _truth_schema(name: str):
    fn = truths.REGISTRY[name]
    hints = typing.get_type_hints(fn)
    fields = {"name": (Literal[name], Field(description="a registered example (slt_relu.truths)"))}
    for pname, p in inspect.signature(fn).parameters.items():
        hint = hints.get(pname, float)
        low, high = TRUTH_SIZE_BOUNDS.get(pname, (-SCALE_BOUND, SCALE_BOUND) if hint is float else (None, None))
        if hint is float:
            hint = Annotated[float, AfterValidator(_zero_or_resolved)]
        fields[pname] = (hint, Field(p.default, ge=low, le=high, description=f"option of {name}"))
    return create_model(f"Truth_{name}", __base__=Section, **fields)


TRUTH_SCHEMAS = {n: _truth_schema(n) for n in truths.names()}
TruthSettings = Annotated[Union[tuple(Annotated[schema, Tag(name)] for name, schema in
                                     [*TRUTH_SCHEMAS.items(), ("inline", InlineTruth),
                                                         (FunctionTruth.__tag__, FunctionTruth)])],
                          Discriminator(truth_tag),
                          Field(description="the truth f0: a registered example and its options, or your own "
                                "(inline w, b, q, c, or name = 'file.py:function')")]


class _Inputs(Section):
    n_in: int | None = Field(None, ge=1, description="input dimension (default: the truth's)")
    cells: int = Field(96, ge=1, le=2048, description="cells per axis of the 2-D tensor rule (Gaussian inputs)")
    order: int = Field(2, ge=1, le=16, description="Gauss nodes per cell and axis")


class UniformInputs(_Inputs):
    distribution: Literal["uniform"]
    half_width: float = Field(gt=0, le=SCALE_BOUND, description="q(x) uniform on [-half_width, half_width]^n_in")


class GaussianInputs(_Inputs):
    distribution: Literal["gaussian"]
    std: float = Field(gt=0, le=SCALE_BOUND, description="q(x) = N(0, std^2 I)")


InputsSettings = Annotated[Union[UniformInputs, GaussianInputs],
                           Field(discriminator="distribution", description="the input distribution q(x)")]


class Experiment(Section):
    """Keys of every config."""

    kind: str = Field(description="the experiment kind")
    name: str | None = Field(None, pattern=NAME_PATTERN, json_schema_extra={"expected": NAME_WORDS},
                             description="the run's name: its default folder is runs/NAME (default: the file's stem)")
    description: str = Field("", max_length=2000, description="one line shown by slt-relu list")
    seed: int = Field(0, ge=0, le=2**63 - 1, description="the root PRNG key (jax.random.PRNGKey takes 0 .. 2^63 - 1)")
    dtype: Literal["float64", "float32"] = Field("float64", description="JAX's float type for the run")


class TruthExperiment(Experiment):
    """Kinds built on a truth network."""

    truth: TruthSettings
    inputs: InputsSettings | None = None
    sigma: float | None = Field(None, gt=0, le=SCALE_BOUND, description="noise standard deviation (default: the example's)")


class Setup(NamedTuple):
    """A resolved truth: the Example, its input distribution and sigma."""

    example: truths.Example
    inputs: object
    sigma: float


def example_of(truth) -> truths.Example:
    """The Example of a [truth] table; ConfigError naming its bad option."""
    if isinstance(truth, (InlineTruth, FunctionTruth)):
        return example_of_own(truth)
    options = truth.model_dump(exclude={"name"})
    try:
        return truths.get(truth.name, **options)
    except (TypeError, ValueError) as err:
        message = str(err)
        raise ConfigError(message if message.startswith("truth") else f"truth: {message}") from None


class _TruthTable(Section):
    truth: TruthSettings


CASE_TRUTH_WORDS = ("a registered example (slt_relu.truths), 'file.py:function' (your own; truth_options its "
                    "arguments) or 'inline' (truth_options: w, b, q, c)")


def case_example(name: str, options: dict, where: str) -> truths.Example:
    """The Example of a case's ``truth`` and ``truth_options``, read as the [truth] table {name, **options}
    (a registered example, 'inline' or 'file.py:function'); ConfigError naming ``where``'s keys."""
    def keys(message: str) -> str:                   # the table's keys as the case writes them
        message = message if message.startswith(where) else f"{where}.{message}"
        return message.replace(f"{where}.truth.name", f"{where}.truth").replace(f"{where}.truth.",
                                                                                f"{where}.truth_options.")
    try:
        return example_of(parse(_TruthTable, {"truth": {"name": name, **dict(options)}}, prefix=where).truth)
    except ConfigError as err:
        raise ConfigError(keys(str(err))) from None


def resolve_inputs(spec, n_in_default: int | None):
    """UniformBox / Gaussian from an [inputs] table."""
    from ..inputs import Gaussian, UniformBox

    n_in = spec.n_in or n_in_default
    if n_in is None:
        raise ConfigError("inputs.n_in: missing; expected a positive integer (no [truth] gives a default)")
    if spec.distribution == "uniform":
        return UniformBox(spec.half_width, n_in, spec.cells, spec.order)
    return Gaussian(spec.std, n_in, spec.cells, spec.order)


def resolve_setup(s: TruthExperiment) -> Setup:
    """The example with the config's [inputs] and sigma applied."""
    example = example_of(s.truth)
    inputs = example.inputs
    if s.inputs is not None:
        if s.inputs.n_in is not None and s.inputs.n_in != example.truth.n_in:
            raise ConfigError(f"inputs.n_in: expected {example.truth.n_in} (the truth's number of inputs), "
                              f"got {s.inputs.n_in}")
        inputs = resolve_inputs(s.inputs, example.truth.n_in)
    return Setup(example, inputs, example.sigma if s.sigma is None else s.sigma)


def require_float64(dtype: str, kind: str, why: str) -> None:
    """ConfigError unless the config's ``dtype`` is float64 (``why``: what needs its resolution)."""
    if dtype != "float64":
        raise ConfigError(f"dtype: expected 'float64' for kind {kind!r} ({why} needs float64's resolution), "
                          f"got {dtype!r}")


def require_increasing(values, key: str) -> None:
    """ConfigError naming ``key`` unless ``values`` increase strictly (e.g. sample sizes n)."""
    if any(b <= a for a, b in zip(values, values[1:])):
        raise ConfigError(f"{key}: expected increasing sample sizes, got {list(values)}")
