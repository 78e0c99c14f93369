import type { CallLatency, LatencyStat, TurnTiming } from '../../db/shapes.ts'

// A call's latency (docs/calls.md, "Latency"): its timed turns and, per stage, the spread of their times. Percentiles
// interpolate linearly between the closest ranks, as PostgreSQL's percentile_cont does for the metrics of a period
// (queries.ts, latencyMetrics), so that a call's figures and a period's are computed the same way.

/** The q-quantile of `count` ascending values (`at(k)`: the k-th), interpolated between the closest ranks. */
function quantile (at: (rank: number) => number, count: number, q: number): number {
  const position = (count - 1) * q
  const below = Math.floor(position)
  return at(below) + (at(Math.ceil(position)) - at(below)) * (position - below)
}

const percentile = (sorted: number[], q: number): number => quantile((rank) => sorted[rank], sorted.length, q)

/**
 * The q-quantile of values given as distinct ascending values with how often each occurs (a rollup's counts, as
 * call_daily_waits keeps them): the same figure as percentile_cont over the values themselves.
 */
export function countedQuantile (counted: ReadonlyArray<{ value: number, n: number }>, q: number): number {
  const total = counted.reduce((sum, row) => sum + row.n, 0)
  const at = (rank: number): number => {
    let seen = 0
    for (const row of counted) {
      seen += row.n
      if (rank < seen) return row.value
    }
    return counted[counted.length - 1].value
  }
  return quantile(at, total, q)
}

/** The spread of the values in whole ms; null when there are none. */
export function latencyStat (values: Array<number | null>): LatencyStat | null {
  const sorted = values.filter((value): value is number => value !== null && Number.isFinite(value)).sort((a, b) => a - b)
  if (sorted.length === 0) return null
  return {
    p50: Math.round(percentile(sorted, 0.5)),
    p90: Math.round(percentile(sorted, 0.9)),
    min: Math.round(sorted[0]),
    max: Math.round(sorted[sorted.length - 1]),
    num: sorted.length
  }
}

/** The call's turns with their summary, as calls.latency keeps it; null for a call without timed turns. */
export function callLatency (turns: TurnTiming[] | undefined): CallLatency | null {
  const e2e = latencyStat(turns?.map((turn) => turn.e2e_ms) ?? [])
  const endOfTurn = latencyStat(turns?.map((turn) => turn.end_of_turn_ms) ?? [])
  if (turns === undefined || e2e === null || endOfTurn === null) return null
  return {
    e2e,
    end_of_turn: endOfTurn,
    transcription: latencyStat(turns.map((turn) => turn.transcription_ms)),
    llm: latencyStat(turns.map((turn) => turn.llm_ms)),
    tts: latencyStat(turns.map((turn) => turn.tts_ms)),
    turns
  }
}
