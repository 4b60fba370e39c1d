"""The package index: simple-API client, target tags, file choice, metadata, downloads."""
