"""--advise."""
