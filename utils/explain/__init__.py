"""Why a precision mode is (not) faster: profiled steps, their time by category, and a diagnosis."""
