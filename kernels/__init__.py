"""Reserved for a later issue; nothing here yet."""
