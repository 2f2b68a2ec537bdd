"""The order in which attention rung 05's PERSISTENT build takes its work items, and a model of how long the busiest
SM works under each way of handing the items out.

An item is one 128-row query block of one (batch, head) pair; its work is its key tiles (all of them, or up to the
diagonal when causal). `item_order` mirrors the kernel's item_at: (batch, head) pairs in sections of `section_heads`,
inside a section the query blocks across the section's heads, longest first when causal. `makespan` is list
scheduling with no costs but the items' tiles: the busiest SM's tiles, against the even share (total / SMs).

    greedy       the next item goes to whichever SM frees first: the hardware's block scheduler on an ordinary
                 launch (in launch order), or the persistent build's counter (in item_order)
    round_robin  block b takes items b, b + P, b + 2P, ...: a persistent kernel with a fixed share

The model leaves out everything but the tiles (a block's start, Q's load, the epilogue, L2), so it ranks orders; it
does not predict times. It is what showed a fixed share to be worse than the ordinary launch on causal shapes
(sections of 12-15 heads: a block gets several of a section's longest items), and why the kernel takes its items
from a counter instead.
"""

from __future__ import annotations

import heapq


def key_tiles(m_block: int, S_q: int, S_k: int, causal: bool, block_m: int = 128, block_n: int = 128) -> int:
    """The key tiles query block `m_block` sees (the kernel's key_tiles)."""
    m0 = m_block * block_m
    n_end = min(S_k, m0 + block_m + S_k - S_q) if causal else S_k
    return -(-n_end // block_n) if n_end > 0 else 0


def item_order(m_blocks: int, heads_total: int, section_heads: int, causal: bool) -> list[tuple[int, int]]:
    """(m_block, batch * H + head) for items 0, 1, ... as the kernel's item_at maps them."""
    items = []
    for first in range(0, heads_total, section_heads):
        heads = min(section_heads, heads_total - first)
        for m_index in range(m_blocks):
            for hh in range(heads):
                items.append((m_blocks - 1 - m_index if causal else m_index, first + hh))
    return items


def launch_order(m_blocks: int, heads_total: int, causal: bool, longest_first: bool = False) -> list[tuple[int, int]]:
    """An ordinary launch's blocks in the order the grid numbers them (x, the query block, fastest); LONGEST_FIRST
    reverses each head's query blocks when causal."""
    flip = causal and longest_first
    return [(m_blocks - 1 - x if flip else x, bh) for bh in range(heads_total) for x in range(m_blocks)]


def makespan(work: list[int], sms: int, how: str = "greedy") -> int:
    """The busiest SM's share of `work` (item lengths, in order) under greedy or round_robin hand-out."""
    if how == "round_robin":
        loads = [0] * sms
        for i, w in enumerate(work):
            loads[i % sms] += w
        return max(loads)
    free = [0] * min(sms, max(len(work), 1))
    for w in work:
        heapq.heappush(free, heapq.heappop(free) + w)
    return max(free)


def compare_orders(B: int, H: int, S: int, causal: bool, sms: int, section_heads: int) -> dict:
    """The busiest SM's tiles under each way of running B x H x S x S attention on `sms` SMs, and the even share."""
    m_blocks = -(-S // 128)

    def tiles(order):
        return [key_tiles(m, S, S, causal) for m, _ in order]

    persistent = tiles(item_order(m_blocks, B * H, section_heads, causal))
    return {"even_share": sum(persistent) / sms,
            "launch_order": makespan(tiles(launch_order(m_blocks, B * H, causal)), sms),
            "longest_first": makespan(tiles(launch_order(m_blocks, B * H, causal, longest_first=True)), sms),
            "persistent_round_robin": makespan(persistent, sms, "round_robin"),
            "persistent_counter": makespan(persistent, sms)}
