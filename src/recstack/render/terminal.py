"""Terminal renderers (rich). Renderers format figures; they never compute them."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.tree import Tree

from recstack.units import binary, count, percent, seconds, si, sig


def console(file: Any = None) -> Console:
    """A rich console; when output is not a terminal (pipes, files, CI logs), 140 columns wide."""
    c = Console(highlight=False, soft_wrap=False, file=file)
    if not c.is_terminal:
        c = Console(highlight=False, soft_wrap=False, file=file, width=140)
    return c


def zoo_table(rows: list[dict[str, Any]]) -> None:
    t = Table(title="recstack model zoo (published sizes unless --scale)")
    for col in ("model", "arch", "tables", "rows", "dim", "table bytes", "lookups/sample", "dense FLOPs/sample", "params"):
        t.add_column(col, justify="left" if col in ("model", "arch") else "right")
    for r in rows:
        t.add_row(
            r["name"],
            r["arch"],
            str(r["tables"]),
            count(r["rows"]),
            str(r["embedding_dim"]),
            si(r["table_bytes"], "B"),
            f"{r['lookups_per_sample']:g}",
            count(r["dense_flops_per_sample"]),
            count(r["params"]),
        )
    c = console()
    c.print(t)
    c.print("dense FLOPs/sample = 2 x multiply-adds of every non-embedding layer (analytic, from the config)")


def zoo_show(info: dict[str, Any]) -> None:
    c = console()
    cfg = info["config"]
    s = info["summary"]
    c.print(f"[bold]{cfg['name']}[/bold] ({cfg['arch']}): {cfg.get('description', '')}")
    c.print(
        f"tables {s['tables']}, rows {count(s['rows'])}, table bytes {si(s['table_bytes'], 'B')}, "
        f"lookups/sample {s['lookups_per_sample']:g}, dense FLOPs/sample {count(s['dense_flops_per_sample'])}, "
        f"params {count(s['params'])}, scale {s['scale']:g}"
    )
    t = Table(title="tables")
    for col in ("table", "feature", "rows", "dim", "kind", "pooling", "max len"):
        t.add_column(col)
    for tb in info["tables"]:
        t.add_row(
            tb["name"], tb["feature"], f"{tb['rows']:,}", str(tb["dim"]), tb["kind"], f"{tb['pooling']:g}",
            str(tb["max_length"] or "-"),
        )
    c.print(t)
    tree = Tree("[bold]modules[/bold]")
    stack: list[tuple[int, Tree]] = [(-1, tree)]
    for row in info["modules"]:
        while stack and stack[-1][0] >= row["depth"]:
            stack.pop()
        node = stack[-1][1].add(f"{row['path']}  [dim]{row['type']}  params {count(row['params'])}[/dim]")
        stack.append((row["depth"], node))
    c.print(tree)



# Nodes a producer adds for time no op accounts for (``extra.kind``), and what they hold.
SYNTHETIC = {
    "unattributed": "time the timing pass measured in the stage that the op pass did not see (not spread over the ops)",
    "framework": "Python and framework time between ops, outside every op the op pass recorded",
    "caller": "the model's own code run outside every stage root just before the stage's root",
}


def _text(v: Any) -> str:
    """A producer's value as plain text, escaped for rich markup."""
    return escape(v if isinstance(v, str) else str(v))


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def node_label(n: Any, depth: int) -> str:
    """The producer's display label (disambiguated among siblings), else the name (a deep module's last part)."""
    label = n.label
    if isinstance(label, str) and label:
        return label
    return n.name.rsplit(".", 1)[-1] if n.level == "module" and depth > 2 else n.name


def roof_fraction(n: Any) -> str:
    """The node's fraction of its roofline ceiling; marked ``?`` (never a plain number) when the roof is suspect."""
    r = n.roofline or {}
    frac = r.get("ceiling_fraction")
    if not _num(frac):
        return "-"
    return percent(frac) + "?" if r.get("roof_suspect") is True else percent(frac)


def print_warnings(c: Console, prof: Any) -> None:
    """A contention banner (when the watch detected other work on the machine) and the notes loading wrote."""
    cont = (prof.environment or {}).get("contention")
    if isinstance(cont, dict) and cont.get("detected") is True:
        lines = [
            "Other work shared this machine while the run was timed: its times are probably inflated and "
            "its roofline fractions too low. Re-run on a quiet machine before comparing or acting on them."
        ]
        lines += [f"  - {_text(e)}" for e in cont.get("evidence") or []] or ["  (no evidence recorded)"]
        if _num(cont.get("cpu_time_ratio")):
            lines.append(f"process CPU time over wall time during the timed steps: {cont['cpu_time_ratio']:.3g}")
        planned = cont.get("planned_load") or []
        if planned:
            names = [_text(p.get("name", p) if isinstance(p, dict) else p) for p in planned]
            lines.append("planned load (recstack's own processes, not contention): " + ", ".join(names))
        c.print(Panel("\n".join(lines), title="[bold]WARNING: contention detected[/bold]", border_style="red"))
    machine = (getattr(prof, "extra", None) or {}).get("machine")
    if isinstance(machine, dict) and machine.get("contended") is True:
        c.print(f"[bold yellow]warning[/bold yellow]: the machine file {_text(machine.get('file') or '')} was "
                "measured under contention: its roofs are probably low, so roofline fractions read high; "
                "`recstack machine --remeasure` on a quiet host replaces it")
    for note in getattr(prof, "notes", None) or []:
        c.print(f"[bold yellow]note[/bold yellow]: {_text(note)}")


def _header(c: Console, prof: Any) -> None:
    run, ov, root = prof.run, prof.overhead, prof.root
    c.print(
        f"[bold]{_text(run.get('model'))}[/bold]  mode={_text(run.get('mode'))} ({_text(run.get('grad_mode'))})  "
        f"batch={_text(run.get('batch_size'))}  backend={_text(run.get('backend', '-'))}  dtype={_text(run.get('dtype'))}"
        + (f" \\[{_text(run['dtype_note'])}]" if run.get("dtype_note") else "")
        + f"  threads={_text(run.get('threads'))}  scale={_text(run.get('scale', '-'))}  workload={_text(run.get('workload', '-'))}"
    )
    lat = root.latency_s or {}
    thr = root.throughput_samples_per_s
    c.print(
        f"step latency (uninstrumented) p50 {seconds(lat.get('p50'))}  p90 {seconds(lat.get('p90'))}  "
        f"p99 {seconds(lat.get('p99'))}  throughput {thr:,.0f} samples/s" if thr else "step latency: -"
    )
    ci = ov.get("stage_pass_ratio_ci") or [None, None]
    opr, spr = ov.get("op_pass_ratio"), ov.get("stage_pass_ratio")
    stage_pass = (
        f"stage pass {spr:.3f}x" + (f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if None not in ci[:2] else "")
        if _num(spr)
        else "stage pass not measured"
    )
    op_pass = f"op pass {opr:.2f}x" if opr else "op pass not run"
    if prof.run.get("source") == "imported":
        per = prof.overhead.get("per_event_s")
        if per is None:
            c.print(f"imported from {prof.run.get('trace')}: profiler overhead unknown (every time includes it)")
        else:
            events = prof.overhead.get("events_per_step", 0)
            removed = prof.overhead.get("removed_step_s", 0)
            bound = ", bounded by what the profiler can have added" if removed < per * events * (1 - 1e-9) else ""
            c.print(f"imported from {prof.run.get('trace')}: profiler overhead estimated from the trace, "
                    f"{per * 1e6:.2f} us per recorded event x {events:,.0f} events; "
                    f"{removed * 1e3:.3f} ms per step removed from the stage times{bound} "
                    "(see overhead.method)")
        return
    c.print(f"profiler overhead: {stage_pass}, {op_pass} vs uninstrumented (measured)")


class _TreeTable:
    """The node table of :func:`profile_tree`, and what its footnotes must explain."""

    def __init__(self, prof: Any, depth: int, top: int) -> None:
        nodes = list(prof.root.walk())
        self.depth, self.top, self.total = depth, top, prof.root.time_s or 1.0
        self.has_cost = any(n.flops is not None or n.bytes is not None for n in nodes)
        self.has_bound = any(n.bound for n in nodes)
        self.has_dtype = any((n.roofline or {}).get("roof_dtype") for n in nodes)
        self.suspect: list[tuple[str, str]] = []  # (label, reason) of the suspect fractions shown
        self.kinds: set[str] = set()  # synthetic kinds shown
        self.table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        for col in ("node", "level", "time/step", "share", "p10-p90", "calls"):
            self.table.add_column(col, justify="left" if col in ("node", "level") else "right")
        if self.has_cost:
            for col in ("FLOPs", "bytes", "FLOP/B"):
                self.table.add_column(col, justify="right")
        if self.has_bound:
            self.table.add_column("% roof", justify="right")
            self.table.add_column("bound")
        if self.has_dtype:
            self.table.add_column("roof")
        self.add(prof.root, 0, "")

    def cells(self, n: Any, d: int, prefix: str) -> list[str]:
        p10, p90 = n.time_s_p10, n.time_s_p90
        kind = n.kind if n.kind in SYNTHETIC else None
        label = node_label(n, d) + ("*" if kind else "")
        row = [
            escape(prefix + label), n.level, seconds(n.time_s), f"{100 * n.time_s / self.total:5.1f}%",
            f"{seconds(p10)}-{seconds(p90)}" if p10 is not None else "", str(n.calls),
        ]
        if self.has_cost:
            row += [count(n.flops), si(n.bytes, "B"), f"{n.intensity:.2f}" if n.intensity is not None else "-"]
        roof = n.roofline or {}
        if self.has_bound:
            frac = roof_fraction(n)
            if frac.endswith("?"):
                self.suspect.append((node_label(n, d), str(roof.get("roof_suspect_reason") or "above the measured roof")))
            row += [frac, n.bound or "-"]
        if self.has_dtype:
            row.append(_text(roof.get("roof_dtype") or "-"))
        if kind:
            self.kinds.add(kind)
        return row

    def add(self, n: Any, d: int, prefix: str) -> None:
        synthetic = n.kind in SYNTHETIC
        self.table.add_row(*self.cells(n, d, prefix), style="dim italic" if synthetic else None)
        if d >= self.depth:
            return
        kids = sorted(n.children, key=lambda k: -k.time_s)
        shown = kids[: self.top]
        for k in shown:
            self.add(k, d + 1, "  " * (d + 1))
        if len(kids) > len(shown):
            rest = sum(k.time_s for k in kids[len(shown) :])
            self.table.add_row(
                "  " * (d + 1) + f"... {len(kids) - len(shown)} more", "", seconds(rest), f"{100 * rest / self.total:5.1f}%", "", ""
            )

    def footnotes(self) -> list[str]:
        out = []
        if self.kinds:
            out.append(
                "* not an op: " + "; ".join(f"{_KIND_NAMES[k]} = {SYNTHETIC[k]}" for k in sorted(self.kinds))
            )
        reasons: dict[str, list[str]] = {}
        for label, reason in self.suspect:
            reasons.setdefault(reason, []).append(label)
        for reason, labels in reasons.items():
            out.append(f"? {_text(reason)}: {', '.join(escape(x) for x in labels)}")
        return out


_KIND_NAMES = {"unattributed": "\\[unattributed]", "framework": "\\[python/framework between ops]",
              "caller": "\\[caller code]"}


def schema_line(prof: Any) -> str:
    """The profile's schema version, and the older one its figures were measured under when it was upgraded."""
    from recstack.report.payload import schema_info

    info = schema_info(prof)
    stats = info["stats_version"]
    older = f" (figures measured under v{stats})" if stats is not None and stats != info["schema_version"] else ""
    return f"profile schema v{info['schema_version']}{older}"


def print_rusage(c: Console, prof: Any) -> None:
    """Per stage, what the kernel counted per step (getrusage): page faults and context switches."""
    stages = [n for n in prof.root.children if isinstance(n.rusage, dict)]
    if not stages:
        return
    t = Table(show_edge=False, pad_edge=False, box=None, header_style="bold", title_justify="left",
              title="per step, from getrusage (central-step mean)")
    t.add_column("stage")
    for col in ("minor faults", "major faults", "vol. ctx sw", "invol. ctx sw"):
        t.add_column(col, justify="right")
    for n in stages:
        r = n.rusage
        t.add_row(escape(n.name), *(count(r.get(k)) for k in RUSAGE_KEYS))
    c.print(t)


RUSAGE_KEYS = ("minor_faults", "major_faults", "voluntary_ctx_switches", "involuntary_ctx_switches")


def print_stage_memory(c: Console, prof: Any) -> None:
    """Per stage, the memory pass's allocator peak (measured) beside the footprint model's (predicted)."""
    from recstack.schema.profile_model import StageMemory  # the renderer reads the field; profiling writes it

    rows = [(n.name, StageMemory.model_validate(n.memory_peak)) for n in prof.root.children
            if n.memory_peak is not None]
    if not rows:
        return
    t = Table(show_edge=False, pad_edge=False, box=None, header_style="bold", title_justify="left",
              title=f"memory pass: peak live bytes per stage above the step's start ({rows[0][1].device} allocator; "
              "docs/memory.md)")
    for col in ("stage", "peak (measured)", "predicted", "allocated", "saved for backward"):
        t.add_column(col, justify="left" if col == "stage" else "right")
    for name, m in rows:
        pred, saved = ("-" if v is None else binary(v) for v in (m.predicted_peak_bytes, m.saved_for_backward_bytes))
        t.add_row(escape(name), binary(m.peak_bytes), pred, binary(m.allocated_bytes), saved)
    c.print(t)


def print_findings(c: Console, prof: Any) -> None:
    """The analyses' findings (``profile.findings``) as written, one line each."""
    findings = [f for f in prof.findings or [] if isinstance(f, dict)]
    if not findings:
        return
    c.print("[bold]Findings[/bold]")
    for f in findings:
        where = f" \\[{_text(f['stage'])}]" if f.get("stage") else ""
        suspect = f.get("roof_suspect") is True  # a roof fraction above a probably under-measured roof
        value = ""
        if _num(f.get("value")) and not f.get("unit"):  # findings with a unit state the figure in their text
            value = f" ({sig(f['value'], 3)}{'?' if suspect else ''})"
        why = f" \\[? {_text(f.get('roof_suspect_reason') or 'above the measured roof')}]" if suspect else ""
        c.print(f"  {_text(f.get('kind', '-'))}{where}: {_text(f.get('text', ''))}{value}{why}")


def print_ranks(c: Console, prof: Any) -> None:
    """A multi-rank profile's ranks: step, compute, communication and waiting per rank, and the imbalance."""
    dist = prof.distributed
    if not isinstance(dist, dict):
        return
    c.print(f"[bold]{dist['world_size']} ranks[/bold] ({_text(dist['sharding'])}, {_text(dist['backend'])}); the tree "
            f"above is the critical path: rank {dist['critical_rank']} (most compute per step)"
            + (f"; [yellow]{_text(dist['oversubscription_note'])}[/yellow]" if dist.get("oversubscription_note") else ""))
    t = Table(box=None, pad_edge=False)
    for col in ("rank", "step", "compute", "communication", "waiting", "peer wait", "transfer", "other", "shards",
                "tables", "requested"):
        t.add_column(col, justify="right")
    for r in dist["per_rank"]:
        split = ("-" if r.get(k) is None else seconds(r[k]) for k in ("peer_wait_s", "transfer_measured_s",
                                                                       "communication_other_s"))
        t.add_row(str(r["rank"]), *(seconds(r[k]) for k in ("time_s", "compute_s", "communication_s", "wait_s")),
                  *split, str(r["shards"]), str(r["tables"]), binary(r["bytes_requested"]))
    c.print(t)
    totals = dist["imbalance"].get("totals") or {}
    c.print("imbalance (max/mean over ranks): " + ", ".join(f"{k} {v:.3f}" for k, v in totals.items())
            + "; waiting = communication beyond the fastest rank's; peer wait / transfer / other: the collective "
            "pass's split (measured; see docs/distributed.md)")
    for r in dist["per_rank"]:
        if r.get("threads"):
            c.print(f"rank {r['rank']} threads (timing pass, cores used / waiting for a core): " + ", ".join(
                f"{_text(t['name'])}{' x' + str(t['threads']) if t['threads'] > 1 else ''} {t['cores']:.2f} / "
                f"{t['waiting_cores']:.2f}" for t in r["threads"] if t["cpu_s"] > 0 or t["runq_wait_s"] > 0))


def profile_tree(prof: Any, *, depth: int = 3, top: int = 8, file: Any = None) -> None:
    """Print a profile: warnings, run summary, the node table (cost and roofline columns when present),
    footnotes, per-stage kernel counters and findings."""
    from recstack.tree import Profile

    assert isinstance(prof, Profile)
    c = console(file)
    print_warnings(c, prof)
    _header(c, prof)
    tree = _TreeTable(prof, depth, top)
    c.print(tree.table)
    for line in tree.footnotes():
        c.print(line)
    if prof.run.get("source") == "imported":
        c.print("[dim]times per step: means over every step of the imported trace, from its ranges (see "
                "docs/import.md)[/dim]")
    else:
        c.print(
            "[dim]times per step: interquartile means (central steps, so stages add up); stage times measured (timing pass), module/op times apportioned from the "
            "op pass within each stage (see docs/profiling.md)[/dim]"
        )
    m = prof.machine or {}
    if m:
        c.print(
            f"[dim]% roof: against {_text(m.get('host'))} measured {_text(m.get('measured_at'))} ({_text(m.get('mode'))}); "
            f"{_text(m.get('peak_label'))}; see docs/machine.md[/dim]"
        )
    for note in m.get("notes") or []:
        c.print(f"roofline note: {_text(note)}")
    c.print(f"[dim]{schema_line(prof)}[/dim]")
    print_rusage(c, prof)
    print_stage_memory(c, prof)
    print_ranks(c, prof)
    print_findings(c, prof)
