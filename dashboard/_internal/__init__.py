"""Implementation of the dashboard: settings, service access, filters, charts and panels."""
