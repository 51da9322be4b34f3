"""Reports of a finished run: terminal summary, JSON file, Allure results (one module each)."""
