"""Writers: JSON, CSV, Markdown (`writers`), PNG plots (`plots`) and merged reports (`merge`)."""
