/**
 * HyperLogLog over the daily visitor sketches count_activity keeps (1,024 one-byte registers; standard error
 * 1.04/sqrt(1024), about 3.3%). Sketches merge by taking each register's maximum, so a range's distinct visitors
 * come from one row per interface and day, however many visitors there were.
 */
export const SKETCH_REGISTERS = 1024;

export function mergeSketch(into: Uint8Array, sketch: Uint8Array) {
  const n = Math.min(into.length, sketch.length);
  for (let i = 0; i < n; i++) if (sketch[i]! > into[i]!) into[i] = sketch[i]!;
}

export function estimateDistinct(registers: Uint8Array): number {
  const m = registers.length;
  let sum = 0;
  let zeros = 0;
  for (const r of registers) {
    sum += 2 ** -r;
    if (r === 0) zeros++;
  }
  const raw = ((0.7213 / (1 + 1.079 / m)) * m * m) / sum;
  // Small ranges: linear counting is the better estimator (and exact-looking for a handful of visitors).
  const estimate = raw <= 2.5 * m && zeros > 0 ? m * Math.log(m / zeros) : raw;
  return Math.round(estimate);
}
