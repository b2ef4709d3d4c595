"""Result schema (`schema`) and writers: JSON, CSV, Markdown (`writers`) and PNG plots (`plots`)."""
