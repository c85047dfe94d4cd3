"""What :func:`run_inference` returns: marginals, methods, convergence, error estimates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from langchain_references.factuality.model import InferenceSummary

ComponentMethod = Literal[
    "isolated", "tree", "junction_tree", "conditioned", "loopy_bp", "gibbs", "brute"
]
_RANK: dict[str, int] = {
    "isolated": 0,
    "tree": 1,
    "brute": 2,
    "junction_tree": 3,
    "conditioned": 4,
    "loopy_bp": 5,
    "gibbs": 6,
}


@dataclass(frozen=True, slots=True)
class ComponentReport:
    """How one connected component was solved.

    Attributes:
        size: Number of variables.
        num_pairwise: Number of pairwise factors (after merging parallel ones).
        method: ``isolated``, ``tree``, ``junction_tree``, ``conditioned`` (junction tree
            after fixing ``hubs`` variables), ``loopy_bp``, ``gibbs`` (loopy BP left some
            atom without an error estimate: parallel-tempered Gibbs sampling of the
            whole component) or ``brute``.
        max_clique: Largest junction-tree clique (``junction_tree`` / ``conditioned``).
        hubs: Variables enumerated by ``conditioned``.
        estimated_error: ``0.0`` for exact methods; for ``loopy_bp`` the largest
            estimated error of the component's atoms (see :class:`InferenceResult`),
            ``None`` if some were not estimated; for ``gibbs`` likewise.
    """

    size: int
    num_pairwise: int
    method: ComponentMethod
    max_clique: int | None = None
    hubs: int = 0
    estimated_error: float | None = 0.0


@dataclass(frozen=True, slots=True)
class BPReport:
    """Outcome of loopy belief propagation (one run covers all its components).

    Attributes:
        iterations: Sweeps of the main run.
        converged: Whether the largest message change fell below the tolerance.
        max_residual: Largest change of a message log-odds in the last sweep.
        clamped: Variables whose marginal was corrected and error estimated by clamping.
        clamp_sweeps: Sweeps spent on the clamped runs.
    """

    iterations: int
    converged: bool
    max_residual: float
    clamped: int = 0
    clamp_sweeps: int = 0


@dataclass(frozen=True, slots=True)
class GibbsReport:
    """Outcome of the Gibbs sampling fallback (one run covers all its components).

    Attributes:
        sweeps: Sweeps run.
        chains: Independent chains.
        levels: Replicas per chain (parallel tempering).
        converged: Whether every sampled marginal's estimated error fell below the
            sampling tolerance within the budget.
        swap_rate: Lowest acceptance rate of replica exchanges between neighbouring
            temperatures.
        hot_rate: Share of their variables the hottest replicas changed per sweep.
        mixed: Whether the ladder worked: that rate at 5 % or more, and the hottest
            replicas changing 5 % or more of their variables per sweep; if not, the
            sampled marginals carry no estimate and, unless sampling was forced, BP's
            answer stands.
    """

    sweeps: int
    chains: int
    levels: int
    converged: bool
    swap_rate: float = 1.0
    hot_rate: float = 1.0
    mixed: bool = True


@dataclass(frozen=True, slots=True)
class InferenceResult:
    """Marginals plus a report of how they were obtained.

    Attributes:
        marginals: ``P(variable = 1)`` for every variable of the graph, in graph order.
        components: One report per connected component.
        bp: Loopy BP outcome, or ``None`` when no component needed it.
        errors: Estimated absolute error of each marginal: ``0.0`` when exact,
            ``2 |P_clamp - P_BP|`` for a variable of a BP component that was clamped (its
            marginal is ``P_clamp``), the sampling estimate for a variable taken from
            Gibbs sampling, ``None`` when not estimated (contexts of BP components that
            needed no sampling; variables beyond every budget).
        gibbs: Gibbs sampling outcome, or ``None`` when no component needed it.
        atom_ids: Ids of the atom variables (the claims), in graph order.
    """

    marginals: dict[str, float]
    components: tuple[ComponentReport, ...]
    bp: BPReport | None
    errors: dict[str, float | None]
    atom_ids: tuple[str, ...] = ()
    gibbs: GibbsReport | None = None

    @property
    def exact(self) -> bool:
        """Whether every marginal is exact (no loopy BP or sampling was involved)."""
        return self.bp is None and self.gibbs is None

    @property
    def method(self) -> ComponentMethod:
        """The least exact method any component needed (``isolated`` for no factors)."""
        worst: ComponentMethod = "isolated"
        for report in self.components:
            if _RANK[report.method] > _RANK[worst]:
                worst = report.method
        return worst

    @property
    def estimated_error(self) -> float | None:
        """Largest estimated error over the atoms (all variables if there are none).

        ``0.0`` when exact, ``None`` when some atom's error was not estimated.
        """
        keys = self.atom_ids or tuple(self.errors)
        values = [self.errors[k] for k in keys]
        if any(v is None for v in values):
            return None
        return max((v for v in values if v is not None), default=0.0)

    def summary(self) -> InferenceSummary:
        """The per-graph report that result writers include."""
        return InferenceSummary(
            method=self.method,
            exact=self.exact,
            estimated_error=self.estimated_error,
            converged=None if self.bp is None else self.bp.converged,
            sweeps=None if self.bp is None else self.bp.iterations,
            residual=None if self.bp is None else self.bp.max_residual,
            atom_errors={a: self.errors[a] for a in self.atom_ids},
            sampling_sweeps=None if self.gibbs is None else self.gibbs.sweeps,
        )
