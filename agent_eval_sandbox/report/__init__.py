"""Reports of a scored run: summary.yaml/json, report.html, junit.xml."""
