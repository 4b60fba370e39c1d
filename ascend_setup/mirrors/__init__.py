"""Mirror ranking: freshness gate, fair throughput measurement, the choice the install uses."""
