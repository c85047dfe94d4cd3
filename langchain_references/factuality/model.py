"""The FactReasoner graphical model: atoms, contexts, judged relations and their factors.

This module reproduces the Markov network that IBM FactReasoner builds
(`github.com/IBM/FactReasoner`, files ``src/fact_reasoner/fact_graph.py``,
``src/fact_reasoner/factreasoner.py`` / ``assessor.py`` (``_build_markov_network``),
``src/fact_reasoner/factors.py`` (``edge_factor_values``, ``PROB_EPS``) and
``src/fact_reasoner/fact_utils.py`` (``PRIOR_PROB_ATOM``, ``PRIOR_PROB_CONTEXT``,
``build_relations``, ``remove_duplicated_contexts``)). No LLM is involved here: the
relations are judged elsewhere and arrive as data.

Model:

* one binary variable per atom and per context (value 1 = "true");
* a unary prior factor ``[1 - pi, pi]`` per variable, ``pi = 0.5`` for atoms and
  ``0.9`` for contexts by default (FactReasoner's ``PRIOR_PROB_ATOM`` /
  ``PRIOR_PROB_CONTEXT``), overridable per variable;
* a pairwise factor per judged relation ``source -> target`` with probability ``p``.
  Tables are indexed ``[x_source, x_target]``; with ``use_priors=True`` (FactReasoner's
  default) they are::

      entailment     (source=1 -> target=1):  [[1 - pi_L, pi_L], [1 - p, p]]
      contradiction  (source=1 -> target=0):  [[1 - pi_L, pi_L], [p, 1 - p]]
      equivalence    (source == target)    :  [[p, 1 - p], [1 - p, p]]

  where ``pi_L`` is the *link* prior: ``atom_prior`` for ``context_atom`` and
  ``atom_atom`` links, ``context_prior`` for ``context_context`` links (FactReasoner
  uses its global constants here, not the endpoint's own prior). The ``source = 0``
  row sums to one like the ``source = 1`` row, so the factor acts as a conditional
  ``P(target | source)`` and does not move the source's own marginal by itself. With
  ``use_priors=False`` the original tables are used: entailment
  ``[[p, p], [1 - p, p]]``, contradiction ``[[p, p], [p, 1 - p]]``.
* every probability entering a table (priors included, after any override) is
  clamped to ``[epsilon, 1 - epsilon]`` with ``epsilon = 1e-6`` as in ``factors.py``,
  so that a judge's 0.0 or 1.0 does not create a hard constraint (and, with several,
  an inconsistent network). ``epsilon`` must be positive (e.g. ``1e-12`` for nearly
  hard constraints), so every factor stays strictly positive and inference can run in
  log space without infinities.

Graph shapes (``--pipeline-version`` in FactReasoner):

* ``FR1``: each atom is related only to the contexts retrieved for it (its own top-k;
  duplicates kept);
* ``FR2``: contexts with the same (snippet, text) are merged, and every atom is related
  to every remaining context;
* ``FR3``: FR2 plus context <-> context relations. Both directions are judged; the
  more probable judgement is kept, and two entailments become an ``equivalence``
  (``fact_utils.build_relations``).

Relations are ``context -> atom`` (the context is the NLI premise, the atom the
hypothesis), ``context -> context`` or ``atom -> atom``; ``neutral`` judgements carry no
factor and are dropped, as FactReasoner does.
"""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

PRIOR_PROB_ATOM = 0.5
"""Default prior of an atom being true (FactReasoner ``PRIOR_PROB_ATOM``)."""
PRIOR_PROB_CONTEXT = 0.9
"""Default prior of a context being true (FactReasoner ``PRIOR_PROB_CONTEXT``)."""
PROB_EPS = 1e-6
"""Default clamp for factor probabilities (FactReasoner ``factors.PROB_EPS``)."""

VariableKind = Literal["atom", "context"]
RelationKind = Literal["entailment", "contradiction", "equivalence", "neutral"]
LinkKind = Literal["context_atom", "context_context", "atom_atom"]
GraphVersion = Literal["FR1", "FR2", "FR3"]
GoldLabel = Literal["S", "NS"]

_RELATION_KINDS: frozenset[str] = frozenset(get_args(RelationKind))
_VERSIONS: frozenset[str] = frozenset(get_args(GraphVersion))


def _check_probability(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number, got {type(value).__name__}")
    result = float(value)
    if not math.isfinite(result) or not 0.0 <= result <= 1.0:
        raise ValueError(f"{what} must be a probability in [0, 1], got {value!r}")
    return result


def _check_id(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Atom:
    """An atomic claim of the response.

    Attributes:
        id: Unique id, e.g. ``"a0"``.
        text: The (revised, self-contained) claim text.
        original: The claim before revision, if known.
        label: Optional gold label: ``"S"`` (supported) or ``"NS"`` (not supported).
        contexts: Ids of the contexts retrieved for this atom, best first (used by FR1).
    """

    id: str
    text: str = ""
    original: str | None = None
    label: GoldLabel | None = None
    contexts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_id(self.id, "atom id")
        if self.label is not None and self.label not in ("S", "NS"):
            raise ValueError(f"atom {self.id!r}: label must be 'S', 'NS' or None")
        object.__setattr__(self, "contexts", tuple(self.contexts))


@dataclass(frozen=True, slots=True)
class Context:
    """A piece of retrieved evidence.

    Attributes:
        id: Unique id, e.g. ``"c_a0_1"``.
        text: The passage text.
        title: Page title.
        snippet: Search snippet, if any.
        link: Source URL, if any.
    """

    id: str
    text: str = ""
    title: str = ""
    snippet: str = ""
    link: str = ""

    def __post_init__(self) -> None:
        _check_id(self.id, "context id")

    @property
    def dedup_key(self) -> tuple[str, str]:
        """Key under which FR2/FR3 merge duplicated contexts (snippet and text)."""
        return (self.snippet, self.text)


@dataclass(frozen=True, slots=True)
class Relation:
    """A judged relation ``source -> target`` (premise -> hypothesis).

    Attributes:
        source: Id of the premise (a context, or an atom for atom-atom links).
        target: Id of the hypothesis.
        kind: ``entailment``, ``contradiction``, ``equivalence`` or ``neutral``.
        probability: The judge's probability of ``kind``.
    """

    source: str
    target: str
    kind: RelationKind
    probability: float

    def __post_init__(self) -> None:
        _check_id(self.source, "relation source")
        _check_id(self.target, "relation target")
        if self.kind not in _RELATION_KINDS:
            raise ValueError(
                f"relation kind must be one of {sorted(_RELATION_KINDS)}, got {self.kind!r}"
            )
        if self.source == self.target:
            raise ValueError(f"relation {self.source!r} -> itself is not allowed")
        object.__setattr__(
            self,
            "probability",
            _check_probability(self.probability, f"relation {self.source}->{self.target}"),
        )


@dataclass(frozen=True, slots=True)
class Variable:
    """A binary variable of the network.

    Attributes:
        id: Atom or context id.
        kind: ``"atom"`` or ``"context"``.
        prior: Prior probability of the variable being true.
    """

    id: str
    kind: VariableKind
    prior: float

    def __post_init__(self) -> None:
        _check_id(self.id, "variable id")
        if self.kind not in ("atom", "context"):
            raise ValueError(f"variable {self.id!r}: kind must be 'atom' or 'context'")
        object.__setattr__(self, "prior", _check_probability(self.prior, f"prior of {self.id}"))


@dataclass(frozen=True)
class FactGraph:
    """Immutable Markov network over atoms and contexts.

    Build it with :func:`build_fact_graph` or :meth:`from_json`; the constructor
    validates the structure. Pass it to
    :func:`langchain_references.factuality.inference.infer_marginals`.

    Attributes:
        variables: The atom and context variables, with their priors.
        relations: Non-neutral relations; each becomes one pairwise factor.
        use_priors: Use FactReasoner's "with priors" pairwise tables (default).
        atom_prior: Link prior ``pi_L`` for ``context_atom``/``atom_atom`` tables.
        context_prior: Link prior ``pi_L`` for ``context_context`` tables.
        epsilon: Probabilities are clamped to ``[epsilon, 1 - epsilon]``.
    """

    variables: tuple[Variable, ...]
    relations: tuple[Relation, ...] = ()
    use_priors: bool = True
    atom_prior: float = PRIOR_PROB_ATOM
    context_prior: float = PRIOR_PROB_CONTEXT
    epsilon: float = PROB_EPS
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "variables", tuple(self.variables))
        object.__setattr__(self, "relations", tuple(self.relations))
        _check_probability(self.atom_prior, "atom_prior")
        _check_probability(self.context_prior, "context_prior")
        eps = _check_probability(self.epsilon, "epsilon")
        if not 0.0 < eps < 0.5:
            raise ValueError(
                "epsilon must be in (0, 0.5): exact 0/1 factors can make the network "
                "inconsistent (FactReasoner clamps with 1e-6 for the same reason)"
            )
        index: dict[str, int] = {}
        for i, var in enumerate(self.variables):
            if not isinstance(var, Variable):
                raise TypeError(f"variables must be Variable, got {type(var).__name__}")
            if var.id in index:
                raise ValueError(f"duplicate variable id {var.id!r}")
            index[var.id] = i
        seen: set[tuple[str, str]] = set()
        for rel in self.relations:
            if not isinstance(rel, Relation):
                raise TypeError(f"relations must be Relation, got {type(rel).__name__}")
            if rel.kind == "neutral":
                raise ValueError(
                    f"neutral relation {rel.source}->{rel.target} carries no factor; drop it "
                    "(build_fact_graph does)"
                )
            for end in (rel.source, rel.target):
                if end not in index:
                    raise ValueError(f"relation {rel.source}->{rel.target}: unknown id {end!r}")
            if (rel.source, rel.target) in seen:
                raise ValueError(f"duplicate relation {rel.source}->{rel.target}")
            seen.add((rel.source, rel.target))
            self._link(rel, index)
        object.__setattr__(self, "_index", index)

    def _link(self, rel: Relation, index: Mapping[str, int]) -> LinkKind:
        src = self.variables[index[rel.source]].kind
        trg = self.variables[index[rel.target]].kind
        if src == "context" and trg == "atom":
            return "context_atom"
        if src == "context" and trg == "context":
            return "context_context"
        if src == "atom" and trg == "atom":
            return "atom_atom"
        raise ValueError(
            f"relation {rel.source}->{rel.target} goes from an atom to a context; FactReasoner "
            "relations are context -> atom (premise -> hypothesis)"
        )

    # ----------------------------------------------------------------- accessors
    @property
    def atom_ids(self) -> tuple[str, ...]:
        """Ids of the atom variables, in graph order."""
        return tuple(v.id for v in self.variables if v.kind == "atom")

    @property
    def context_ids(self) -> tuple[str, ...]:
        """Ids of the context variables, in graph order."""
        return tuple(v.id for v in self.variables if v.kind == "context")

    @property
    def num_factors(self) -> int:
        """Number of factors: one unary per variable plus one per relation."""
        return len(self.variables) + len(self.relations)

    def link_of(self, relation: Relation) -> LinkKind:
        """Link type of a relation of this graph (by its endpoint kinds)."""
        return self._link(relation, self._index)

    # ------------------------------------------------------------------- factors
    def _clamp(self, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.clip(values, self.epsilon, 1.0 - self.epsilon)

    def unary_tables(self) -> npt.NDArray[np.float64]:
        """Unary factor tables, shape ``(n_variables, 2)``: ``[1 - pi, pi]``."""
        pri = self._clamp(np.array([v.prior for v in self.variables], dtype=np.float64))
        return np.stack([1.0 - pri, pri], axis=1)

    def edge_index(self) -> npt.NDArray[np.int64]:
        """Variable positions of each relation, shape ``(n_relations, 2)``: source, target."""
        if not self.relations:
            return np.zeros((0, 2), dtype=np.int64)
        return np.array(
            [(self._index[r.source], self._index[r.target]) for r in self.relations],
            dtype=np.int64,
        )

    def pairwise_tables(self) -> npt.NDArray[np.float64]:
        """Pairwise factor tables, shape ``(n_relations, 2, 2)``, indexed ``[x_src, x_trg]``."""
        m = len(self.relations)
        tables = np.empty((m, 2, 2), dtype=np.float64)
        if m == 0:
            return tables
        p = self._clamp(np.array([r.probability for r in self.relations], dtype=np.float64))
        kinds = np.array([r.kind for r in self.relations])
        link_prior = np.array(
            [
                self.context_prior if self.link_of(r) == "context_context" else self.atom_prior
                for r in self.relations
            ],
            dtype=np.float64,
        )
        pi = self._clamp(link_prior)
        ent = kinds == "entailment"
        equ = kinds == "equivalence"
        if self.use_priors:
            tables[:, 0, 0] = 1.0 - pi
            tables[:, 0, 1] = pi
        else:
            tables[:, 0, 0] = p
            tables[:, 0, 1] = p
        tables[:, 1, 0] = np.where(ent, 1.0 - p, p)
        tables[:, 1, 1] = np.where(ent, p, 1.0 - p)
        # Equivalence ignores ``use_priors``: [[p, 1-p], [1-p, p]].
        tables[equ, 0, 0] = p[equ]
        tables[equ, 0, 1] = 1.0 - p[equ]
        tables[equ, 1, 0] = 1.0 - p[equ]
        tables[equ, 1, 1] = p[equ]
        return tables

    # ------------------------------------------------------------------ JSON I/O
    @classmethod
    def from_json(
        cls,
        data: Mapping[str, Any],
        *,
        use_priors: bool = True,
        atom_prior: float = PRIOR_PROB_ATOM,
        context_prior: float = PRIOR_PROB_CONTEXT,
        epsilon: float = PROB_EPS,
    ) -> FactGraph:
        """Load FactReasoner's ``fact_graph.json`` structure.

        ``{"nodes": [{"id", "type": "atom"|"context", "probability"}], "edges": [{"from",
        "to", "relation", "probability", "link"}]}`` (``FactGraph.from_json`` in
        ``fact_graph.py``). ``source``/``target`` are accepted for ``from``/``to`` (the
        keys FactReasoner's own ``as_json`` writes). A missing node probability takes
        the default prior of its type; a given ``link`` must match the endpoint types.

        Args:
            data: The parsed JSON object.
            use_priors: See :class:`FactGraph`.
            atom_prior: Default atom prior and ``pi_L`` of atom links.
            context_prior: Default context prior and ``pi_L`` of context links.
            epsilon: Probability clamp.

        Returns:
            The graph.

        Raises:
            ValueError: On a malformed structure (message names the offending item).
        """
        if not isinstance(data, Mapping) or "nodes" not in data or "edges" not in data:
            raise ValueError("fact graph JSON must be an object with 'nodes' and 'edges'")
        nodes, edges = data["nodes"], data["edges"]
        if not isinstance(nodes, list) or not isinstance(edges, list):
            raise ValueError("fact graph 'nodes' and 'edges' must be lists")
        variables: list[Variable] = []
        for i, node in enumerate(nodes):
            if not isinstance(node, Mapping):
                raise ValueError(f"node #{i} is not an object")
            kind = node.get("type")
            if kind not in ("atom", "context"):
                raise ValueError(f"node #{i}: type must be 'atom' or 'context', got {kind!r}")
            default = atom_prior if kind == "atom" else context_prior
            variables.append(
                Variable(
                    id=_check_id(node.get("id"), f"node #{i} id"),
                    kind=kind,
                    prior=node.get("probability", default),
                )
            )
        relations: list[Relation] = []
        kinds = {v.id: v.kind for v in variables}
        for i, edge in enumerate(edges):
            if not isinstance(edge, Mapping):
                raise ValueError(f"edge #{i} is not an object")
            src = edge.get("from", edge.get("source"))
            trg = edge.get("to", edge.get("target"))
            if "probability" not in edge:
                raise ValueError(f"edge #{i}: missing 'probability'")
            rel = Relation(
                source=_check_id(src, f"edge #{i} 'from'"),
                target=_check_id(trg, f"edge #{i} 'to'"),
                kind=edge.get("relation", edge.get("type")),
                probability=edge["probability"],
            )
            link = edge.get("link")
            expected = f"{kinds.get(rel.source)}_{kinds.get(rel.target)}"
            if link is not None and link != expected:
                raise ValueError(f"edge #{i}: link {link!r} does not match endpoints ({expected})")
            if rel.kind != "neutral":
                relations.append(rel)
        return cls(
            variables=tuple(variables),
            relations=tuple(relations),
            use_priors=use_priors,
            atom_prior=atom_prior,
            context_prior=context_prior,
            epsilon=epsilon,
        )

    def to_json(self) -> dict[str, Any]:
        """Serialise to the ``fact_graph.json`` structure read by :meth:`from_json`."""
        return {
            "nodes": [{"id": v.id, "type": v.kind, "probability": v.prior} for v in self.variables],
            "edges": [
                {
                    "from": r.source,
                    "to": r.target,
                    "relation": r.kind,
                    "probability": r.probability,
                    "link": self.link_of(r),
                }
                for r in self.relations
            ],
        }


@dataclass(frozen=True, slots=True)
class InferenceSummary:
    """How the posteriors of one graph were computed, for result writers.

    Built by ``InferenceResult.summary()`` in
    :mod:`langchain_references.factuality.inference`.

    Attributes:
        method: The least exact method any component needed: ``isolated``, ``tree``,
            ``brute``, ``junction_tree``, ``conditioned`` (exact, after enumerating hub
            variables), ``loopy_bp`` or ``gibbs`` (loopy BP, then Gibbs sampling where
            BP gave no error estimate).
        exact: Whether every posterior is exact.
        estimated_error: Largest estimated absolute error of an atom posterior (``0.0``
            when exact, ``None`` when some atom's error could not be estimated).
        converged: Whether loopy BP converged (``None`` when it did not run).
        sweeps: Loopy BP sweeps (``None`` when it did not run).
        residual: Largest message log-odds change of BP's last sweep (``None`` when it
            did not run).
        atom_errors: Estimated absolute error of each atom posterior, by atom id
            (``None`` where not estimated).
        sampling_sweeps: Gibbs sampling sweeps (``None`` when it did not run).
    """

    method: str
    exact: bool
    estimated_error: float | None
    converged: bool | None = None
    sweeps: int | None = None
    residual: float | None = None
    atom_errors: dict[str, float | None] = field(default_factory=dict)
    sampling_sweeps: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields: ``inference_method``, ``inference_exact``, ... (see below).

        Returns:
            ``{"inference_method", "inference_exact", "inference_estimated_error",
            "inference_converged", "inference_sweeps", "inference_residual",
            "inference_sampling_sweeps", "atom_errors"}``.
        """
        return {
            "inference_method": self.method,
            "inference_exact": self.exact,
            "inference_estimated_error": self.estimated_error,
            "inference_converged": self.converged,
            "inference_sweeps": self.sweeps,
            "inference_residual": self.residual,
            "inference_sampling_sweeps": self.sampling_sweeps,
            "atom_errors": dict(self.atom_errors),
        }


# ---------------------------------------------------------------------- builders
def _check_version(version: str) -> GraphVersion:
    if version not in _VERSIONS:
        raise ValueError(f"version must be one of {sorted(_VERSIONS)}, got {version!r}")
    return version  # type: ignore[return-value]


def _check_inputs(atoms: Sequence[Atom], contexts: Sequence[Context]) -> None:
    atom_ids: set[str] = set()
    for atom in atoms:
        if not isinstance(atom, Atom):
            raise TypeError(f"atoms must be Atom, got {type(atom).__name__}")
        if atom.id in atom_ids:
            raise ValueError(f"duplicate atom id {atom.id!r}")
        atom_ids.add(atom.id)
    context_ids: set[str] = set()
    for ctx in contexts:
        if not isinstance(ctx, Context):
            raise TypeError(f"contexts must be Context, got {type(ctx).__name__}")
        if ctx.id in context_ids or ctx.id in atom_ids:
            raise ValueError(f"duplicate id {ctx.id!r}")
        context_ids.add(ctx.id)
    for atom in atoms:
        for cid in atom.contexts:
            if cid not in context_ids:
                raise ValueError(f"atom {atom.id!r} refers to unknown context {cid!r}")


def dedupe_contexts(contexts: Sequence[Context]) -> tuple[tuple[Context, ...], dict[str, str]]:
    """Merge contexts with the same (snippet, text), keeping the first one.

    Mirrors ``remove_duplicated_contexts`` in FactReasoner's ``fact_utils.py``.

    Args:
        contexts: Contexts in retrieval order.

    Returns:
        The unique contexts and a map from every input id to its kept id.
    """
    kept: dict[tuple[str, str], Context] = {}
    alias: dict[str, str] = {}
    for ctx in contexts:
        first = kept.setdefault(ctx.dedup_key, ctx)
        alias[ctx.id] = first.id
    return tuple(kept.values()), alias


def _own_contexts(atom: Atom, top_k: int | None) -> tuple[str, ...]:
    return atom.contexts if top_k is None else atom.contexts[:top_k]


def candidate_pairs(
    atoms: Sequence[Atom],
    contexts: Sequence[Context],
    *,
    version: GraphVersion = "FR2",
    top_k: int | None = None,
) -> list[tuple[str, str]]:
    """The ``(premise_id, hypothesis_id)`` pairs a judge must score for a graph version.

    FR1: ``(c, a)`` for each atom's own contexts (first ``top_k`` if given). FR2: ``(c, a)``
    for every atom and every de-duplicated context. FR3: FR2 plus both directions of every
    pair of de-duplicated contexts (ordered by id, as ``build_relations`` does).

    Args:
        atoms: The atoms.
        contexts: The contexts.
        version: ``"FR1"``, ``"FR2"`` or ``"FR3"``.
        top_k: FR1 only: how many of each atom's contexts to use.

    Returns:
        The pairs, in a deterministic order.

    Raises:
        ValueError: On an unknown version, a bad ``top_k`` or inconsistent ids.
    """
    version = _check_version(version)
    _check_top_k(top_k)
    _check_inputs(atoms, contexts)
    if version == "FR1":
        return [(cid, a.id) for a in atoms for cid in _own_contexts(a, top_k)]
    unique, _ = dedupe_contexts(contexts)
    pairs = [(c.id, a.id) for a in atoms for c in unique]
    if version == "FR3":
        ids = sorted(c.id for c in unique)
        for i, ci in enumerate(ids):
            for cj in ids[i + 1 :]:
                pairs.extend([(ci, cj), (cj, ci)])
    return pairs


def _check_top_k(top_k: int | None) -> None:
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be a positive integer or None, got {top_k!r}")


def reconcile_context_pair(forward: Relation, backward: Relation) -> Relation | None:
    """Merge the two judgements of a context pair the way FactReasoner's FR3 does.

    The judgement with the higher probability wins (``backward`` on a tie); if both are
    entailments the winner becomes an ``equivalence``; a neutral winner means no factor
    (``fact_utils.build_relations``).

    Args:
        forward: Judgement of ``c_i -> c_j``.
        backward: Judgement of ``c_j -> c_i``.

    Returns:
        The relation to keep, or ``None``.

    Raises:
        ValueError: If the two relations are not the two directions of one pair.
    """
    if (forward.source, forward.target) != (backward.target, backward.source):
        raise ValueError("reconcile_context_pair needs the two directions of one pair")
    winner = forward if forward.probability > backward.probability else backward
    if forward.kind == "entailment" and backward.kind == "entailment":
        winner = Relation(winner.source, winner.target, "equivalence", winner.probability)
    return None if winner.kind == "neutral" else winner


_Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _GraphShape:
    """Which relations a graph version admits.

    Attributes:
        version: The graph version.
        atom_ids: The atoms' ids.
        alias: Each context id, to the id of the context it was merged into (itself if kept).
        kept_ids: The ids of the contexts kept (not merged away).
        own: Each atom's own context ids (FR1's contexts of the atom).
    """

    version: GraphVersion
    atom_ids: set[str]
    alias: dict[str, str]
    kept_ids: set[str]
    own: dict[str, set[str]]

    def _check(
        self, rel: object, seen: Mapping[_Pair, Relation], more: Mapping[_Pair, Relation]
    ) -> Relation:
        """The relation, if it is one between known ids and not a duplicate."""
        if not isinstance(rel, Relation):
            raise TypeError(f"relations must be Relation, got {type(rel).__name__}")
        for end in (rel.source, rel.target):
            if end not in self.atom_ids and end not in self.alias:
                raise ValueError(f"relation {rel.source}->{rel.target}: unknown id {end!r}")
        key = (rel.source, rel.target)
        if key in seen or key in more:
            raise ValueError(f"duplicate relation {rel.source}->{rel.target}")
        return rel

    def _context_pair_kept(self, rel: Relation) -> bool:
        """FR3 keeps a pair of kept contexts (neutral ones too: the reconciliation reads them)."""
        return self.version == "FR3" and rel.source in self.kept_ids and rel.target in self.kept_ids

    def _from_context_kept(self, rel: Relation) -> bool:
        """Whether the version admits a relation from a context to an atom."""
        if self.version == "FR1":
            return rel.source in self.own[rel.target]
        return rel.source in self.kept_ids

    def sort(
        self, relations: Iterable[object]
    ) -> tuple[dict[_Pair, Relation], dict[_Pair, Relation], int]:
        """Check the relations and sort them out.

        Args:
            relations: The judged relations.

        Returns:
            The relations admitted as they are, FR3's context pairs to reconcile, and how many
            non-neutral relations the version leaves out.

        Raises:
            TypeError: If one is not a :class:`Relation`.
            ValueError: On an unknown id or a duplicated relation.
        """
        admitted: dict[_Pair, Relation] = {}
        ctx_pairs: dict[_Pair, Relation] = {}
        dropped = 0
        for item in relations:
            rel = self._check(item, admitted, ctx_pairs)
            key = (rel.source, rel.target)
            if rel.source in self.alias and rel.target in self.alias:
                if self._context_pair_kept(rel):
                    ctx_pairs[key] = rel
                elif rel.kind != "neutral":
                    dropped += 1
            elif rel.kind == "neutral":
                continue
            elif rel.source in self.alias and not self._from_context_kept(rel):
                dropped += 1
            else:  # atom->atom kept as given; atom->context fails in FactGraph
                admitted[key] = rel
        return admitted, ctx_pairs, dropped


def _reconciled(ctx_pairs: Mapping[_Pair, Relation]) -> dict[_Pair, Relation]:
    """FR3's context pairs, each merged with its other direction (reconcile_context_pair)."""
    admitted: dict[_Pair, Relation] = {}
    for (src, trg), rel in ctx_pairs.items():
        if (trg, src) in ctx_pairs:
            if src > trg:
                continue  # handled from the other direction
            merged = reconcile_context_pair(rel, ctx_pairs[(trg, src)])
        else:
            merged = None if rel.kind == "neutral" else rel
        if merged is not None:
            admitted[(merged.source, merged.target)] = merged
    return admitted


def _variables(
    atoms: Sequence[Atom],
    kept_contexts: Sequence[Context],
    shape: _GraphShape,
    priors: Mapping[str, float] | None,
    atom_prior: float,
    context_prior: float,
) -> list[Variable]:
    """The graph's variables: every atom, then the kept contexts, with their priors."""
    overrides = dict(priors or {})
    for vid in overrides:
        if vid not in shape.atom_ids and vid not in shape.kept_ids:
            raise ValueError(f"prior override for unknown or merged id {vid!r}")
    variables = [Variable(a.id, "atom", overrides.get(a.id, atom_prior)) for a in atoms]
    variables += [
        Variable(c.id, "context", overrides.get(c.id, context_prior)) for c in kept_contexts
    ]
    return variables


def build_fact_graph(
    atoms: Sequence[Atom],
    contexts: Sequence[Context],
    relations: Iterable[Relation],
    *,
    version: GraphVersion = "FR2",
    top_k: int | None = None,
    atom_prior: float = PRIOR_PROB_ATOM,
    context_prior: float = PRIOR_PROB_CONTEXT,
    priors: Mapping[str, float] | None = None,
    use_priors: bool = True,
    epsilon: float = PROB_EPS,
) -> FactGraph:
    """Build the FR1/FR2/FR3 network from atoms, contexts and judged relations.

    Relations outside the version's shape (an FR1 relation to a context the atom did
    not retrieve, context-context relations in FR1/FR2, relations from a context merged
    away as a duplicate) are left out and counted in a warning; neutral ones are dropped
    silently. In FR3, when both directions of a context pair are given they are merged
    with :func:`reconcile_context_pair`; a single direction is kept as given.

    Args:
        atoms: The atoms (with their own context ids for FR1).
        contexts: The contexts, in retrieval order.
        relations: Judged relations (see :func:`candidate_pairs` for what to judge).
        version: ``"FR1"``, ``"FR2"`` (FactReasoner's default) or ``"FR3"``.
        top_k: FR1 only: keep each atom's first ``top_k`` contexts.
        atom_prior: Prior of every atom (and link prior of atom links).
        context_prior: Prior of every context (and link prior of context links).
        priors: Per-variable prior overrides, by id.
        use_priors: Use the "with priors" pairwise tables (FactReasoner's default).
        epsilon: Probability clamp.

    Returns:
        The graph: all atoms, the version's contexts and the admitted relations.

    Raises:
        ValueError: On unknown ids, duplicated relations or bad parameters.
    """
    version = _check_version(version)
    _check_top_k(top_k)
    _check_inputs(atoms, contexts)
    if version == "FR1":
        kept_contexts: tuple[Context, ...] = tuple(contexts)
        alias = {c.id: c.id for c in contexts}
    else:
        kept_contexts, alias = dedupe_contexts(contexts)
    shape = _GraphShape(
        version=version,
        atom_ids={a.id for a in atoms},
        alias=alias,
        kept_ids={c.id for c in kept_contexts},
        own={a.id: set(_own_contexts(a, top_k)) for a in atoms},
    )
    admitted, ctx_pairs, dropped = shape.sort(relations)
    admitted.update(_reconciled(ctx_pairs))
    if dropped:
        logger.warning("%d relation(s) outside the %s graph shape were left out", dropped, version)
    variables = _variables(atoms, kept_contexts, shape, priors, atom_prior, context_prior)
    return FactGraph(
        variables=tuple(variables),
        relations=tuple(admitted.values()),
        use_priors=use_priors,
        atom_prior=atom_prior,
        context_prior=context_prior,
        epsilon=epsilon,
    )
