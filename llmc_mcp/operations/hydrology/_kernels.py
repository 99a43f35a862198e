"""The routing kernels of :mod:`._routing`, compiled by numba (imported by :func:`._routing.kernels`
only, under :func:`.compiled.compiled_code`, which decides where their machine code comes from).

Module-level functions, not closures, so that numba can key their cached code by this file's content
and each function's line (DD-MCP-100).
"""

from __future__ import annotations

import heapq

import numba
import numpy as np

from llmc_mcp.operations.hydrology._routing import DC, DR, SHARE_TOLERANCE, SLOPE_TOLERANCE

jit = numba.njit(nogil=True, cache=True)


@jit
def dinf_angles(z: np.ndarray, valid: np.ndarray) -> np.ndarray:
    rows, cols = z.shape
    out = np.full((rows, cols), np.nan, dtype=np.float32)
    quarter = np.pi / 4.0
    for r in range(rows):
        for c in range(cols):
            if not valid[r, c]:
                continue
            best, angle = 0.0, -1.0
            for k1 in (0, 2, 4, 6):  # the facet's cardinal neighbour
                r1, c1 = r + DR[k1], c + DC[k1]
                if r1 < 0 or r1 >= rows or c1 < 0 or c1 >= cols or not valid[r1, c1]:
                    continue
                for side in (1, -1):  # its diagonal neighbour, clockwise or counter-clockwise
                    k2 = (k1 + side) % 8
                    r2, c2 = r + DR[k2], c + DC[k2]
                    if r2 < 0 or r2 >= rows or c2 < 0 or c2 >= cols or not valid[r2, c2]:
                        continue
                    s1 = z[r, c] - z[r1, c1]
                    s2 = z[r1, c1] - z[r2, c2]
                    facet = np.arctan2(s2, s1)
                    slope = np.sqrt(s1 * s1 + s2 * s2)
                    if facet < 0.0:
                        facet, slope = 0.0, s1
                    elif facet > quarter:
                        facet, slope = quarter, (z[r, c] - z[r2, c2]) / np.sqrt(2.0)
                    if slope > best:
                        best = slope
                        angle = (90.0 + 45.0 * k1 + side * np.degrees(facet)) % 360.0
            if angle >= 0.0:
                stored = np.float32(angle)
                out[r, c] = np.float32(0.0) if stored >= np.float32(360.0) else stored
            else:
                out[r, c] = np.float32(-1.0)
    return out


@jit
def receivers(
    field: np.ndarray, valid: np.ndarray, dinf: bool, exponent: float, r: int, c: int, out: np.ndarray
) -> int:
    """Write cell (r, c)'s receivers into ``out`` as (neighbour k, share) rows; return how many.

    Computed again wherever needed instead of stored: a table of eight receivers a cell would cost
    128 bytes a cell, 2 GiB at the cell limit. ``field`` holds dinf angles or mfd elevations.
    """
    rows, cols = field.shape
    count = 0
    if dinf:
        a = np.float64(field[r, c])
        if a < 0.0:
            return 0
        position = ((a - 90.0) % 360.0) / 45.0
        k = int(np.floor(position)) % 8
        f = position - np.floor(position)
        if f < SHARE_TOLERANCE:
            f = 0.0
        elif f > 1.0 - SHARE_TOLERANCE:
            f, k = 0.0, (k + 1) % 8
        for kk, share in ((k, 1.0 - f), ((k + 1) % 8, f)):
            rr, cc = r + DR[kk], c + DC[kk]
            if share > 0.0 and 0 <= rr < rows and 0 <= cc < cols and valid[rr, cc]:
                out[count, 0], out[count, 1] = kk, share
                count += 1
        return count
    total = 0.0
    for k in range(8):
        rr, cc = r + DR[k], c + DC[k]
        if 0 <= rr < rows and 0 <= cc < cols and valid[rr, cc] and field[rr, cc] < field[r, c]:
            distance = np.sqrt(2.0) if k % 2 == 1 else 1.0
            drop = np.float64(field[r, c]) - np.float64(field[rr, cc])
            weight = (drop / distance) ** exponent
            out[count, 0], out[count, 1] = k, weight
            total += weight
            count += 1
    for j in range(count):
        out[j, 1] = out[j, 1] / total
    return count


@jit
def mfd_mask(z: np.ndarray, valid: np.ndarray) -> np.ndarray:
    rows, cols = z.shape
    mask = np.zeros((rows, cols), dtype=np.uint16)
    for r in range(rows):
        for c in range(cols):
            if not valid[r, c]:
                continue
            for k in range(8):
                rr, cc = r + DR[k], c + DC[k]
                if 0 <= rr < rows and 0 <= cc < cols and valid[rr, cc] and z[rr, cc] < z[r, c]:
                    mask[r, c] |= np.uint16(1 << k)
    return mask


@jit
def accumulate(field: np.ndarray, valid: np.ndarray, values: np.ndarray, dinf: bool, exponent: float) -> int:
    """Add to every cell of ``values`` (in place) the shares passed to it from upstream; return how
    many valid cells were done (fewer than the valid cells: the rest drain in a loop)."""
    rows, cols = field.shape
    out = np.zeros((8, 2), dtype=np.float64)
    donors = np.zeros((rows, cols), dtype=np.uint8)
    for r in range(rows):
        for c in range(cols):
            if valid[r, c]:
                for j in range(receivers(field, valid, dinf, exponent, r, c, out)):
                    k = int(out[j, 0])
                    donors[r + DR[k], c + DC[k]] += 1
    queue = np.empty(rows * cols, dtype=np.int32)
    tail = 0
    for r in range(rows):
        for c in range(cols):
            if valid[r, c] and donors[r, c] == 0:
                queue[tail] = r * cols + c
                tail += 1
    head = 0
    while head < tail:
        r, c = queue[head] // cols, queue[head] % cols
        head += 1
        for j in range(receivers(field, valid, dinf, exponent, r, c, out)):
            k = int(out[j, 0])
            rr, cc = r + DR[k], c + DC[k]
            values[rr, cc] += values[r, c] * out[j, 1]
            donors[rr, cc] -= 1
            if donors[rr, cc] == 0:
                queue[tail] = rr * cols + cc
                tail += 1
    return head


@jit
def fill_flats(z: np.ndarray, valid: np.ndarray) -> np.ndarray:
    rows, cols = z.shape
    out = z.copy()
    closed = ~valid
    heap = [(np.float32(0.0), np.int64(0), np.int64(0))]
    heap.pop()
    pits = np.empty(rows * cols, dtype=np.int32)
    head = tail = 0
    order = 0
    for r in range(rows):
        for c in range(cols):
            if not valid[r, c]:
                continue
            edge = r == 0 or r == rows - 1 or c == 0 or c == cols - 1
            for k in range(8):
                rr, cc = r + DR[k], c + DC[k]
                if 0 <= rr < rows and 0 <= cc < cols and not valid[rr, cc]:
                    edge = True
            if edge:
                closed[r, c] = True
                heapq.heappush(heap, (out[r, c], np.int64(order), np.int64(r * cols + c)))
                order += 1
    while head < tail or len(heap) > 0:
        if head < tail:
            i = pits[head]
            head += 1
        else:
            i = heapq.heappop(heap)[2]
        r, c = i // cols, i % cols
        step = np.float32(np.nextafter(out[r, c], np.float32(np.inf)))
        for k in range(8):
            rr, cc = r + DR[k], c + DC[k]
            if rr < 0 or rr >= rows or cc < 0 or cc >= cols or closed[rr, cc]:
                continue
            closed[rr, cc] = True
            if out[rr, cc] <= step:
                out[rr, cc] = step
                pits[tail] = rr * cols + cc
                tail += 1
            else:
                heapq.heappush(heap, (out[rr, cc], np.int64(order), np.int64(rr * cols + cc)))
                order += 1
    return out


@jit
def breach(z: np.ndarray, valid: np.ndarray, max_depth: float) -> tuple[np.ndarray, int]:
    """Cut a channel out of every pit, cheapest first; return the DEM and how many pits were not cut.

    ``max_depth``: the deepest cut allowed (``inf``: no limit); a pit that needs a deeper one is
    left for the caller to fill.
    """
    rows, cols = z.shape
    n = rows * cols
    out = z.copy()
    edge = np.zeros(n, dtype=np.bool_)
    pits = [(np.float32(0.0), np.int64(0), np.int64(0))]
    pits.pop()
    for r in range(rows):
        for c in range(cols):
            if not valid[r, c]:
                continue
            lower = False
            for k in range(8):
                rr, cc = r + DR[k], c + DC[k]
                if rr < 0 or rr >= rows or cc < 0 or cc >= cols or not valid[rr, cc]:
                    edge[r * cols + c] = True
                elif z[rr, cc] < z[r, c]:
                    lower = True
            if not lower and not edge[r * cols + c]:
                heapq.heappush(pits, (z[r, c], np.int64(r * cols + c), np.int64(r * cols + c)))
    flat = out.ravel()
    seen = np.full(n, -1, dtype=np.int32)
    settled = np.full(n, -1, dtype=np.int32)
    cost = np.zeros(n, dtype=np.float64)
    level = np.zeros(n, dtype=np.float32)
    parent = np.full(n, -1, dtype=np.int32)
    search, uncut, order = 0, 0, 0
    while len(pits) > 0:
        p = heapq.heappop(pits)[2]
        pr, pc = p // cols, p % cols
        still = True
        for k in range(8):
            rr, cc = pr + DR[k], pc + DC[k]
            if valid[rr, cc] and flat[rr * cols + cc] < flat[p]:
                still = False  # an earlier channel passes beside it
        if not still:
            continue
        heap = [(0.0, np.int64(0), np.int64(p))]
        seen[p], cost[p], level[p], parent[p] = search, 0.0, flat[p], -1
        found = -1
        while len(heap) > 0:
            d, _, i = heapq.heappop(heap)
            if settled[i] == search:
                continue
            settled[i] = search
            if i != p and (flat[i] < level[i] or edge[i]):
                found = i
                break
            r, c = i // cols, i % cols
            step = np.float32(np.nextafter(level[i], np.float32(-np.inf)))
            for k in range(8):
                rr, cc = r + DR[k], c + DC[k]
                if rr < 0 or rr >= rows or cc < 0 or cc >= cols or not valid[rr, cc]:
                    continue
                j = rr * cols + cc
                if settled[j] == search:
                    continue
                cut = np.float64(flat[j]) - np.float64(step)
                if cut > max_depth:
                    continue
                reached = d + max(cut, 0.0)
                if seen[j] != search or reached < cost[j]:
                    seen[j], cost[j], level[j], parent[j] = search, reached, step, i
                    order += 1
                    heapq.heappush(heap, (reached, np.int64(order), np.int64(j)))
        search += 1
        if found < 0:
            uncut += 1
            continue
        i = found if flat[found] >= level[found] else parent[found]
        while i != p:
            flat[i] = min(flat[i], level[i])
            i = parent[i]
    return out, uncut


@jit
def steepest_d8(
    z: np.ndarray,
    valid: np.ndarray,
    east: np.ndarray,
    south: np.ndarray,
    south_east: np.ndarray,
    south_west: np.ndarray,
) -> np.ndarray:
    rows, cols = z.shape
    codes = np.zeros((rows, cols), dtype=np.uint8)
    distance = np.empty(8, dtype=np.float64)
    slope = np.empty(8, dtype=np.float64)
    for r in range(rows):
        # Row r's neighbours above are row r - 1's neighbours below, seen from the other end.
        above = max(r - 1, 0)
        distance[0] = distance[4] = east[r]
        distance[1], distance[2], distance[3] = south_east[r], south[r], south_west[r]
        distance[5], distance[6], distance[7] = south_east[above], south[above], south_west[above]
        for c in range(cols):
            if not valid[r, c]:
                continue
            here = np.float64(z[r, c])
            steepest = 0.0
            for k in range(8):
                rr, cc = r + DR[k], c + DC[k]
                if 0 <= rr < rows and 0 <= cc < cols and valid[rr, cc]:
                    slope[k] = (here - np.float64(z[rr, cc])) / distance[k]
                    steepest = max(steepest, slope[k])
                else:
                    slope[k] = 0.0
            if steepest > 0.0:
                for k in range(8):  # ESRI order: the first of the equally steep
                    if slope[k] >= steepest * (1.0 - SLOPE_TOLERANCE):
                        codes[r, c] = np.uint8(1 << k)
                        break
    return codes


@jit
def route_flats(z: np.ndarray, valid: np.ndarray, codes: np.ndarray) -> None:
    rows, cols = z.shape
    cells = rows * cols
    # 0: not on a flat (or not valid); 1: on a flat, no direction yet; 2: a way out, or reached
    state = np.zeros(cells, dtype=np.uint8)
    on_flats = 0
    for r in range(rows):
        for c in range(cols):
            if not valid[r, c] or codes[r, c] != 0:
                continue
            for k in range(8):
                rr, cc = r + DR[k], c + DC[k]
                if 0 <= rr < rows and 0 <= cc < cols and valid[rr, cc] and z[rr, cc] == z[r, c]:
                    state[r * cols + c] = 1
                    on_flats += 1
                    break
    if on_flats == 0:
        return
    # The ways out: flat cells on the edge of the data (outlets: they keep 0), and the cells of a
    # flat's height beside it that drain by the steepest descent.
    beside = 0
    for r in range(rows):
        for c in range(cols):
            if state[r * cols + c] != 1:
                continue
            for k in range(8):
                rr, cc = r + DR[k], c + DC[k]
                if rr < 0 or rr >= rows or cc < 0 or cc >= cols or not valid[rr, cc]:
                    state[r * cols + c] = 2
                elif state[rr * cols + cc] == 0 and codes[rr, cc] != 0 and z[rr, cc] == z[r, c]:
                    state[rr * cols + cc] = 2
                    beside += 1
    queue = np.empty(on_flats + beside, dtype=np.int64)
    tail = 0
    for i in range(cells):  # the ways out in row order
        if state[i] == 2:
            queue[tail] = i
            tail += 1
    head = 0
    for start in range(-1, cells):
        if start >= 0:  # a flat left without a way out: its first cell in row order is its sink
            if state[start] != 1:
                continue
            state[start] = 2
            queue[tail] = start
            tail += 1
        while head < tail:  # breadth first: every flat cell drains one step nearer a way out
            i = queue[head]
            head += 1
            r, c = i // cols, i % cols
            for k in range(8):
                rr, cc = r + DR[k], c + DC[k]
                if 0 <= rr < rows and 0 <= cc < cols:
                    j = rr * cols + cc
                    if state[j] == 1 and z[rr, cc] == z[r, c]:
                        codes[rr, cc] = np.uint8(1 << ((k + 4) % 8))
                        state[j] = 2
                        queue[tail] = j
                        tail += 1
