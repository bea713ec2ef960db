"""What studies write: tables, results files, figures."""
