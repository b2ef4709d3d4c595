"""The `validate` pipeline: a converted artifact judged against its native model (`pipeline`)."""
