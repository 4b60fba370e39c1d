"""Model hubs (ModelScope, Hugging Face and their mirrors): listings, range reads, resumable downloads."""
