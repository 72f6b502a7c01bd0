"""Workflows: what a command does from end to end, the flow run → report → store → judge →
present composed. `pipeline` (checks run, stored, judged, recorded: one RunVerdict), the
`nightly`, its `schedule`, the `upgrade` check, the fabric `sweep`, and the `site_check`
before every run. The one package that imports judge and present together."""
