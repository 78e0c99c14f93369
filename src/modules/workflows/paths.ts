// Where a value is in a JSON answer, as an API call step's response_variables say it: members by name, dotted
// (`data.slot.id`), list items by index in brackets (`slots[0]`, `data.items[2].name`), a name with dots
// in quoted brackets (`["x.y"]`).

const SEGMENT = /\.?([A-Za-z_$][\w$-]*)|\[(\d+)\]|\["([^"]*)"\]|\['([^']*)'\]/y

/** The path's segments (names and indexes), or undefined when it is not one. */
export function pathSegments (path: string): Array<string | number> | undefined {
  const segments: Array<string | number> = []
  let at = 0
  while (at < path.length) {
    SEGMENT.lastIndex = at
    const match = SEGMENT.exec(path)
    if (match === null || (at === 0 && path.startsWith('.'))) return undefined
    at = SEGMENT.lastIndex
    const [, name, index, double, single] = match
    segments.push(index !== undefined ? Number(index) : (name ?? double ?? single))
  }
  return segments.length === 0 ? undefined : segments
}

/** The value at `path` in `value`, or undefined when it is not there. Own members only. */
export function valueAt (value: unknown, path: string): unknown {
  const segments = pathSegments(path)
  if (segments === undefined) return undefined
  let current = value
  for (const segment of segments) {
    if (typeof segment === 'number') {
      if (!Array.isArray(current) || segment >= current.length) return undefined
      current = current[segment]
    } else {
      if (current === null || typeof current !== 'object' || Array.isArray(current) || !Object.hasOwn(current, segment)) return undefined
      current = (current as Record<string, unknown>)[segment]
    }
  }
  return current
}
