"""The network_landscape kind's schema and its cross-checks (``slt_relu.kinds.network_landscape``): [network] (a
two-layer truth's network, a digits MLP or the toy model of superposition) and [landscape] (the plane, the Hessian's
spectrum, the input slice's regions)."""
from __future__ import annotations

from typing import Annotated, Literal, NamedTuple, Union

from pydantic import Field, field_validator, model_validator

from ..workflow.settings import SCALE_BOUND, ConfigError, Section
from ..workflow.schemas import TruthExperiment, TruthSettings, resolve_setup

__all__ = []   # nothing to import: a part of the kinds that import it, not an API

MAX_FEATURES = 10            # the TMS k-gons of the tms kind (slt_relu.tms.kgon_table's sizes)
DIGITS_TRAIN = 1347          # load_digits()'s training images (test_fraction 0.25, stratified)
DENSITY_STEPS = 80           # SLQ's Lanczos steps per probe by default (at most D)
Positive = Annotated[int, Field(ge=1, le=4096)]
Label = Annotated[int, Field(ge=0, le=9)]


class TruthNetwork(Section):
    source: Literal["truth"]
    width: int | None = Field(None, ge=1, le=256, description="the model's nodes d (default: the truth's model width); "
                              "nodes beyond the truth's start at zero")
    n: int = Field(10000, ge=1, le=10**7, description="data points drawn from the truth: x ~ q(x), y = f0(x) + "
                   "sigma eps")


class DigitsNetwork(Section):
    source: Literal["digits"]
    widths: tuple[Positive, ...] = Field((64, 64, 10), description="[64, hidden widths..., 10]")
    steps: int = Field(1000, ge=0, le=10**6, description="Adam steps on the training digits' cross-entropy")
    learning_rate: float = Field(3e-3, gt=0, le=SCALE_BOUND, description="Adam's step size")
    batch_size: int = Field(64, ge=0, le=DIGITS_TRAIN, description="training digits per Adam step (0: all of them)")

    @model_validator(mode="after")
    def _shape(self):
        w = self.widths
        if len(w) < 3 or w[0] != 64 or w[-1] != 10:
            raise ValueError(f"widths: expected [64, hidden widths..., 10] (8 x 8 pixels in, 10 digits out) with at "
                             f"least one hidden layer, got {list(w)}")
        return self


class TMSNetwork(Section):
    source: Literal["tms"]
    features: int = Field(6, ge=2, le=MAX_FEATURES, description="the toy model's features c")
    k: int = Field(6, ge=1, le=MAX_FEATURES, description="the refined k-gon (slt_relu.tms.refined_kgon) at which the "
                   "landscape is drawn")
    n_positive: int = Field(0, ge=0, le=MAX_FEATURES, description="unused features with a positive bias (the k-gon's "
                            "variant)")
    loss: Literal["population", "empirical"] = Field("population", description="the exact population loss L, or L_n "
                                                     "on n inputs x = mu e_i")
    n: int = Field(1000, ge=1, le=10**7, description="inputs for loss = \"empirical\"")


NetworkSettings = Annotated[Union[TruthNetwork, DigitsNetwork, TMSNetwork],
                            Field(discriminator="source", description="the network and its point: the two-layer "
                                  "network at the [truth] table's truth, an MLP trained on the digits, or the toy "
                                  "model of superposition at a k-gon")]


class LandscapeSettings(Section):
    directions: Literal["random", "hessian"] = Field("random", description="two filter-normalised Gaussian "
                                                     "directions (Li et al. 2018), or the top two Hessian eigenvectors")
    range: float = Field(1.0, gt=0, le=SCALE_BOUND, description="the plane's half-width, in units of the directions")
    resolution: int = Field(41, ge=3, le=401, description="grid points per axis, odd (the point at the centre)")
    line_resolution: int = Field(201, ge=3, le=10001, description="points of the 1-D slice along each direction, odd")
    top_eigenvalues: int = Field(5, ge=1, le=200, description="the Hessian's largest eigenvalues k (Lanczos), k <= D")
    trace_samples: int = Field(100, ge=2, le=100_000, description="Rademacher probes of Hutchinson's trace estimate")
    density_probes: int = Field(5, ge=1, le=1000, description="probes of the spectral density (stochastic Lanczos "
                                "quadrature)")
    density_steps: int | None = Field(None, ge=1, le=1000, description=f"Lanczos steps per probe, <= D (default "
                                      f"min(D, {DENSITY_STEPS}))")
    density_sigma: float = Field(0.01, gt=0, le=1, description="the density's Gaussian width, a fraction of the "
                                 "nodes' span")
    regions: bool | None = Field(None, description="exact linear regions on a 2-D slice of input space (default: true "
                                 "for a two-input truth's network and the digits network, false otherwise)")
    region_digits: tuple[Label, Label, Label] | None = Field(None, description="digits source: the slice is the plane "
                                                             "through the first training image of each of these three "
                                                             "digits (default [0, 1, 2])")

    @field_validator("resolution", "line_resolution")
    @classmethod
    def _odd(cls, value):
        if value % 2 == 0:
            raise ValueError(f"expected an odd number (the point at the centre), got {value}")
        return value

    @field_validator("region_digits")
    @classmethod
    def _distinct(cls, values):
        if values is not None and len(set(values)) != 3:
            raise ValueError(f"expected three distinct digits, got {list(values)}")
        return values


class Settings(TruthExperiment):
    """Experiment kind ``network_landscape``: the loss landscape of a network around a point."""

    kind: Literal["network_landscape"]
    truth: TruthSettings | None = Field(None, description="the truth f0 of network.source = 'truth' (a registered "
                                        "example and its options, or your own: inline w, b, q, c, or name = "
                                        "'file.py:function')")
    network: NetworkSettings
    landscape: LandscapeSettings = LandscapeSettings()


class Resolved(NamedTuple):
    """The settings with what the run needs: D (the network's parameters), the truth's Example, q(x) and sigma
    (source "truth"; None otherwise), the SLQ steps, whether to compute regions."""

    settings: Settings
    num_params: int
    example: object
    inputs: object
    sigma: float | None
    density_steps: int
    regions: bool


def num_params(s: Settings, example=None) -> int:
    """D of the config's network (source "truth": of its model at [network] width)."""
    net = s.network
    if net.source == "digits":
        return sum(b * (a + 1) for a, b in zip(net.widths[:-1], net.widths[1:]))
    if net.source == "tms":
        return 3 * net.features
    base = example.model.base
    return (net.width or base.width) * (base.n_in + 2) + 1


def resolve(s: Settings, raw=None) -> Resolved:
    net, t = s.network, s.landscape
    example = inputs = sigma = None
    if net.source == "truth":
        if s.truth is None:
            raise ConfigError("truth: missing; expected a [truth] table (a registered example, inline w, b, q, c, or "
                              "'file.py:function') for network.source = 'truth'")
        setup = resolve_setup(s)
        example, inputs, sigma = setup.example, setup.inputs, setup.sigma
        base = example.model.base
        if net.width is not None and net.width < base.width:
            raise ConfigError(f"network.width: expected at least the truth's model width {base.width}, got {net.width}")
    else:
        for key in ("truth", "inputs", "sigma"):
            if getattr(s, key) is not None:
                raise ConfigError(f"{key}: expected none for network.source = {net.source!r} (only a truth's network "
                                  f"reads [truth], [inputs] and sigma)")
    if net.source == "digits":
        import importlib.util

        if importlib.util.find_spec("sklearn") is None:
            raise ConfigError("network.source: 'digits' reads scikit-learn's 8 x 8 digits (offline), which is not "
                              "installed: pip install \"slt_relu[data]\"")
    if net.source == "tms":
        if net.k > net.features:
            raise ConfigError(f"network.k: expected 1 <= k <= features = {net.features}, got {net.k}")
        if net.n_positive > net.features - net.k:
            raise ConfigError(f"network.n_positive: expected at most features - k = {net.features - net.k} unused "
                              f"features, got {net.n_positive}")
    D = num_params(s, example)
    if t.top_eigenvalues > D:
        raise ConfigError(f"landscape.top_eigenvalues: expected at most D = {D} (the network's parameters), got "
                          f"{t.top_eigenvalues}")
    if t.density_steps is not None and t.density_steps > D:
        raise ConfigError(f"landscape.density_steps: expected at most D = {D} (the network's parameters), got "
                          f"{t.density_steps}")
    regions = t.regions
    can = net.source == "digits" or (net.source == "truth" and example.model.base.n_in >= 2)
    if regions and not can:
        why = ("the toy model of superposition is not an MLP of its input (W^T W x: its input enters twice)"
               if net.source == "tms" else "the truth has one input: no 2-D slice of input space")
        raise ConfigError(f"landscape.regions: expected false or unset for this network ({why}), got true")
    if t.region_digits is not None and net.source != "digits":
        raise ConfigError(f"landscape.region_digits: expected unset for network.source = {net.source!r} (the digits "
                          f"network's slice only), got {list(t.region_digits)}")
    steps = t.density_steps or min(D, DENSITY_STEPS)
    return Resolved(s, D, example, inputs, sigma, steps, can if regions is None else regions)


def chunk_points(n: int, D: int) -> int:
    """The points the slices evaluate together (``slt_relu.landscape``'s default chunk)."""
    from ..posterior.target import LOSSES_CHUNK_POINTS

    return max(1, min(16, LOSSES_CHUNK_POINTS // (n + D)))

