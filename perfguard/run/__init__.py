"""Run: ReFrame invoked with the site's configuration, and the workflows
(nightly, upgrade check) built on it."""
