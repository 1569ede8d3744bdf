"""PySpark execution backend for Substrait plans."""
