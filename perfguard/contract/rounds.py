"""Pairing rounds of the fabric sweep: every pair of nodes once, each node in at most one
pair per round. The sweep check builds its job from them; the analysis reads them back."""

from __future__ import annotations


def circle_rounds(count: int) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint pairs of ``range(count)``, every pair exactly once: hold the
    first seat, rotate the others one place per round (the circle method)."""
    seats: list[int | None] = list(range(count)) + ([None] if count % 2 else [])
    size = len(seats)
    rounds = []
    for _ in range(size - 1):
        pairs = [(seats[i], seats[size - 1 - i]) for i in range(size // 2)]
        rounds.append([(min(a, b), max(a, b)) for a, b in pairs
                       if a is not None and b is not None])
        seats = [seats[0], seats[-1], *seats[1:-1]]
    return rounds


def in_slots(pairs: list[tuple], at_once: int) -> list[list[tuple]]:
    """A round's pairs in groups of at most ``at_once`` (0: all at once)."""
    at_once = at_once or len(pairs) or 1
    return [pairs[i:i + at_once] for i in range(0, len(pairs), at_once)]


def disjoint_rounds(pairs: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Given pairs (a retest) as few rounds of disjoint pairs as a greedy pass finds."""
    rounds: list[list[tuple[str, str]]] = []
    for pair in pairs:
        for existing in rounds:
            if not {n for p in existing for n in p} & set(pair):
                existing.append(pair)
                break
        else:
            rounds.append([pair])
    return rounds


def leaf_rounds(groups: list[list[str]]) -> list[list[tuple[str, str]]]:
    """Rounds that follow the switches: first every leaf's own circle rounds side by side
    (all leaves at once), then across the spine one pair per pair of leaves, the leaves
    meeting by the circle method and each leaf sending another of its nodes to each
    partner leaf (so one slow node does not make its leaf's uplinks look slow)."""
    groups = [g for g in groups if g]
    within = [circle_rounds(len(g)) for g in groups]
    rounds = [[(g[a], g[b]) for g, own in zip(groups, within) if r < len(own)
               for a, b in own[r]] for r in range(max(map(len, within), default=0))]
    for r, leaf_pairs in enumerate(circle_rounds(len(groups))):
        rounds.append([(groups[a][r % len(groups[a])], groups[b][r % len(groups[b])])
                       for a, b in leaf_pairs])
    return [r for r in rounds if r]
