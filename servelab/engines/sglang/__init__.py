"""SGLang: its engine face and its own client, bounded in time."""
