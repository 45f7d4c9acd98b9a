"""report.html's stylesheet: inline (the CSP allows inline style and nothing external)."""

STYLE = """
:root { --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --infra: #bc4c00; --muted: #656d76; --line: #d0d7de;
        --bg: #f6f8fa; --fg: #1f2328; --accent: #0969da; }
* { box-sizing: border-box; }
body { font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; padding: 20px 24px 40px;
       max-width: 1280px; color: var(--fg); }
h1 { margin: 0; font-size: 24px; } h2 { margin: 32px 0 10px; font-size: 19px; border-bottom: 1px solid var(--line);
     padding-bottom: 4px; }
h3 { margin: 18px 0 6px; font-size: 16px; } h4 { margin: 0; font-size: 14px; display: inline; }
a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
.sub { margin: 2px 0 10px; color: var(--muted); }
.muted { color: var(--muted); }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
code { background: var(--bg); border-radius: 4px; padding: 0 3px; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 10px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--bg); font-weight: 600; }
td { overflow-wrap: anywhere; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.cases td:first-child { max-width: 22em; }
dl.grid { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 12px 0; padding: 10px 14px;
          background: var(--bg); border-radius: 6px; }
dl.grid dt { color: var(--muted); } dl.grid dd { margin: 0; overflow-wrap: anywhere; }
nav { margin: 8px 0; } nav a { margin-right: 16px; font-weight: 600; }
.banner { padding: 10px 14px; border-radius: 6px; font-weight: 600; margin: 10px 0; border: 1px solid transparent; }
.banner.ok { background: #dafbe1; color: var(--ok); border-color: #aceebb; }
.banner.bad { background: #ffebe9; color: var(--bad); border-color: #ffcecb; }
.banner.warn { background: #fff8c5; color: var(--warn); border-color: #eed888; }
.banner.infra { background: #fff1e5; color: var(--infra); border-color: #ffd8b5; }
.banner.none { background: var(--bg); color: var(--muted); }
.badge { display: inline-block; min-width: 3em; padding: 0 7px; border-radius: 10px; font-size: 12px; font-weight: 600;
         text-align: center; white-space: nowrap; vertical-align: 1px; }
.pass, .good { background: #dafbe1; color: var(--ok); } .fail, .bad { background: #ffebe9; color: var(--bad); }
.mid { background: #fff8c5; color: var(--warn); } .error { background: #fbefff; color: #8250df; }
.skip, .neutral { background: var(--bg); color: var(--muted); }
.infra { background: #fff1e5; color: var(--infra); } .interrupted { background: #eaeef2; color: #424a53; }
.warn { background: #fff8c5; color: var(--warn); }
.badge.inc { background: none; color: var(--warn); border: 1px dashed var(--warn); min-width: 0; margin-left: 3px;
             font-weight: 500; }
.box { border-radius: 6px; padding: 8px 12px; margin: 8px 0; }
.box-bad { background: #ffebe9; border: 1px solid #ffcecb; }
.box-warn { background: #fff8c5; border: 1px solid #eed888; }
.cut { color: var(--warn); font-size: 12px; font-style: italic; margin: 2px 0 6px; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: var(--bg); border-radius: 4px; padding: 6px 8px;
      margin: 4px 0; line-height: 1.4; max-height: 32em; overflow: auto; }
details > summary { cursor: pointer; }
details > summary::marker { color: var(--muted); }
article.case { border: 1px solid var(--line); border-left: 5px solid var(--line); border-radius: 6px;
               padding: 10px 14px; margin: 14px 0; background: #fff; }
article.st-pass { border-left-color: var(--ok); } article.st-fail { border-left-color: var(--bad); }
article.st-mid { border-left-color: var(--warn); } article.st-infra { border-left-color: var(--infra); }
article.st-interrupted { border-left-color: #8c959f; }
article.case h3 { margin: 0 0 4px; } article.case .self { color: var(--muted); }
article.case .facts { margin: 2px 0 8px; color: var(--muted); }
.part { margin: 10px 0; } .part > summary { margin-bottom: 4px; }
.judge { margin: 6px 0; } .jhead { display: flex; gap: 6px; align-items: baseline; flex-wrap: wrap; }
.jname { font-weight: 600; } .judge pre.rationale { max-height: 14em; }
.conversation { border-left: 2px solid var(--line); padding-left: 10px; margin: 6px 0; }
.turn { margin: 8px 0; } .who { font-weight: 600; font-size: 13px; }
.say { white-space: pre-wrap; overflow-wrap: anywhere; margin: 2px 0 4px; }
.say-long > summary .say-preview { font-style: italic; }
.sys { color: var(--muted); font-size: 12px; margin: 4px 0; }
details.thinking > summary { color: var(--muted); font-size: 12px; }
details.tool { border: 1px solid var(--line); border-radius: 6px; margin: 4px 0; background: #fff; }
details.tool > summary { padding: 3px 8px; background: var(--bg); border-radius: 6px; }
details.tool.err { border-color: #ffcecb; }
details.tool .tname { font-weight: 600; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
details.tool .preview { background: none; color: var(--muted); }
.tbody { padding: 4px 10px 8px; }
.label { color: var(--muted); font-size: 11px; text-transform: uppercase; letter-spacing: .04em; margin-top: 6px; }
.kv .k { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; color: var(--muted); }
pre.result.err { background: #ffebe9; }
.subagent { border-left: 2px dashed var(--line); padding-left: 10px; margin-top: 6px; }
.final pre { background: #ddf4ff; }
.file { margin: 4px 0; } .file > summary, .fhead { font-size: 13px; }
pre.diff .add { color: var(--ok); } pre.diff .del { color: var(--bad); } pre.diff .hunk { color: #8250df; }
.where { font-size: 12px; margin: 10px 0 0; }
footer { margin-top: 32px; font-size: 12px; }
@media print { details { display: block; } pre { max-height: none; } }
"""
