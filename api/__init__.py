"""The HTTP API: runs, logs, gate verdicts, schedules, probes, metrics, the codec server, and the web console
(`api/console/`: sign-in, runs and approvals in the browser, live through the API's one watch of the runs)."""
