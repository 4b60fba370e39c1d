"""What a fleet needs from the tool: the target each host's install takes, and one report of many audits."""
