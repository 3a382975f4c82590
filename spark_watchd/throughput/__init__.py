"""Training throughput: progress reports, per-job metrics, the per-run ledger."""
