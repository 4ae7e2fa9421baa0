"""The HTTP API: one Powertools resolver serves API Gateway and the local HTTP server alike."""
