"""Figures: every figure the command line writes, as functions you can call on your own numbers.

Each ``*_figure`` function takes plain arrays and labels, or a kind's results Dataset as ``results.nc`` holds it
(never a kind's settings), and returns a :class:`matplotlib.figure.Figure` that no pyplot state holds; the
single-panel ones (:func:`landscape_figure` without ``along``, :func:`spectrum_figure`, :func:`free_energy_figure`,
:func:`llc_cases_figure`, :func:`lines_figure`, :func:`kgon_loss_figure`) also draw into a given ``ax`` and then
return its figure.  :func:`save_figure` writes a PNG as the runner does.  Importing the package does not change
matplotlib's backend; ``import slt_relu`` does not import it (``slt_relu.plots`` is imported on first use).

- ``landscape``: K(w) over a plane with W0, Fisher rank against the bound, Fisher spectra;
- ``phases``: W0's phases in the input plane, effective weights;
- ``regions``: linear regions, zero sets, dual points, functional dimension;
- ``network_landscape``: any network's loss around a point (contours, surface, lines), its Hessian's spectral
  density, its linear regions on a slice of input space;
- ``posterior``: phase masses, local free energies and their scaling, rules against classify_phase, phase
  diagrams, effective-weight densities, chain traces;
- ``llc``: learning coefficients against known values, beta sweeps, SGLD calibration;
- ``free_energy_curve``: lambda read off tempered SMC's free-energy curves;
- ``observables``: susceptibilities of the posterior to the data of each cell of the input box;
- ``tms``, ``tms_training``: the toy model of superposition's k-gons, their losses, lambda per k-gon, its
  Bayesian transition and its training trajectories.

docs/howto/plot.md draws each figure from library results or a results folder.
"""
from ._style import save_figure
from .free_energy_curve import lambda_curve_figure
from .landscape import landscape_figure, rank_vs_bound_figure, spectrum_figure
from .llc import beta_sweep_figure, llc_calibration_figure, llc_cases_figure, llc_settings_figure
from .network_landscape import hessian_density_figure, input_regions_figure, loss_surface_figure
from .observables import susceptibility_figure
from .phases import effective_weights_figure, phase_gallery_figure
from .posterior import (cross_table_figure, free_energy_figure, free_energy_scaling_figure, phase_diagram_figure,
                        phase_mass_figure, posterior_traces_figure, weights_facets_figure)
from .regions import (affine_map_figure, functional_dimension_figure, layer_boundaries_figure, lines_figure,
                      regions_figure)
from .tms import kgon_gallery_figure, kgon_loss_figure, tms_lambda_figure, tms_transition_figure
from .tms_training import tms_training_figure

__all__ = ["affine_map_figure", "beta_sweep_figure", "cross_table_figure", "effective_weights_figure",
           "free_energy_figure", "free_energy_scaling_figure", "functional_dimension_figure", "hessian_density_figure",
           "input_regions_figure", "kgon_gallery_figure", "kgon_loss_figure", "lambda_curve_figure",
           "landscape_figure", "layer_boundaries_figure", "lines_figure", "llc_calibration_figure",
           "llc_cases_figure", "llc_settings_figure", "loss_surface_figure", "phase_diagram_figure",
           "phase_gallery_figure",
           "phase_mass_figure", "posterior_traces_figure", "rank_vs_bound_figure", "regions_figure", "save_figure",
           "spectrum_figure", "susceptibility_figure", "tms_lambda_figure", "tms_training_figure", "tms_transition_figure",
           "weights_facets_figure"]
