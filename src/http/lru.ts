/** A Map in least-recently-used order: a hit moves its entry to the end, and the oldest leave first. */
export class Lru<V> {
  readonly #max: number
  readonly #entries = new Map<string, V>()

  constructor (max: number) {
    this.#max = max
  }

  get (key: string): V | undefined {
    const value = this.#entries.get(key)
    if (value !== undefined) {
      this.#entries.delete(key)
      this.#entries.set(key, value)
    }
    return value
  }

  has (key: string): boolean {
    return this.#entries.has(key)
  }

  set (key: string, value: V): void {
    this.#entries.delete(key)
    this.#entries.set(key, value)
    if (this.#entries.size > this.#max) this.#entries.delete(this.#entries.keys().next().value!)
  }

  delete (key: string): void {
    this.#entries.delete(key)
  }

  clear (): void {
    this.#entries.clear()
  }
}
