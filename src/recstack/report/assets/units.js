/* recstack pages: numbers with units, as text. The one place the pages format figures; the same rules as
 * recstack/units.py. Every function takes a number (anything else prints "-") and returns a string. */
"use strict";

const UNITS = (() => {
  const isNum = (v) => typeof v === "number" && Number.isFinite(v);

  /** ``v`` to ``digits`` significant digits, never in exponent notation; 1000 and more are whole, grouped. */
  function sig(v, digits = 3) {
    if (!isNum(v)) return "-";
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1000) return Math.round(v).toLocaleString("en-US");
    const d = Math.max(0, digits - 1 - Math.floor(Math.log10(a)));
    return v.toFixed(Math.min(d, 6));
  }

  /** Seconds with a unit chosen by magnitude: s, ms, µs, ns. */
  function time(s) {
    if (!isNum(s)) return "-";
    const a = Math.abs(s);
    if (a >= 1) return sig(s, 4) + " s";
    if (a >= 1e-3) return sig(s * 1e3, 4) + " ms";
    if (a >= 1e-6) return sig(s * 1e6, 3) + " µs";
    if (a === 0) return "0 s";
    return sig(s * 1e9, 3) + " ns";
  }

  const PREFIX = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  /** A count with an SI prefix and a unit: si(2.5e9, "FLOP") -> "2.50 GFLOP". */
  function si(v, unit) {
    if (!isNum(v)) return "-";
    const a = Math.abs(v);
    for (const [div, p] of PREFIX) if (a >= div) return sig(v / div, 3) + " " + p + unit;
    return sig(v, 3) + " " + unit;
  }
  /** A power of ten as a short tick label: decade(1e10, "FLOP/s") -> "10 GFLOP/s"; decade(0.01, "") -> "0.01". */
  function decade(v, unit) {
    for (const [div, p] of PREFIX) if (v >= div) return String(Math.round(v / div)) + (unit ? " " + p + unit : p);
    const text = v >= 1 ? String(Math.round(v)) : v.toFixed(Math.round(-Math.log10(v)));
    return unit ? text + " " + unit : text;
  }
  /** An axis label without trailing zeros: "5.000 ms" -> "5 ms", "2.500 ms" -> "2.5 ms". */
  function tick(text) {
    const m = /^(-?\d+)(\.\d+)?( .*)$/.exec(text);
    if (!m || !m[2]) return text;
    const dec = m[2].replace(/0+$/, "");
    return m[1] + (dec === "." ? "" : dec) + m[3];
  }
  const bytes = (v) => si(v, "B");
  const flops = (v) => si(v, "FLOP");
  const flopRate = (v) => si(v, "FLOP/s");
  const byteRate = (v) => si(v, "B/s");
  const intensity = (v) => (isNum(v) ? sig(v, 3) + " FLOP/B" : "-");
  /** A fraction as a percentage: pct(0.456) -> "45.6 %". */
  const pct = (v, digits = 1) => (isNum(v) ? (v * 100).toFixed(digits) + " %" : "-");
  /** A relative change with its sign: relPct(0.123) -> "+12.3 %". */
  const relPct = (v) => (isNum(v) ? (v > 0 ? "+" : "") + (v * 100).toFixed(1) + " %" : "-");
  const ratio = (v) => (isNum(v) ? v.toFixed(3) + "×" : "-");
  /** A factor to 3 significant digits: times(1.5) -> "1.50×". */
  const times = (v) => (isNum(v) ? sig(v, 3) + "×" : "-");
  const count = (v) => (isNum(v) ? (Number.isInteger(v) ? v.toLocaleString("en-US") : sig(v, 4)) : "-");
  /** A count with an SI prefix and no unit, whole below 1000: compact(1234) -> "1.23k", compact(2.5) -> "2.50". */
  function compact(v) {
    if (!isNum(v)) return "-";
    const a = Math.abs(v);
    for (const [div, p] of PREFIX) if (a >= div) return sig(v / div, 3) + p;
    return Number.isInteger(v) ? String(v) : sig(v, 3);
  }
  /** ``text`` with a "+" in front when ``v`` is positive (a delta formatted elsewhere). */
  const signed = (text, v) => (isNum(v) && v > 0 ? "+" + text : text);

  return { isNum, sig, time, si, decade, tick, bytes, flops, flopRate, byteRate, intensity, pct, relPct, ratio, times, count, compact, signed };
})();
