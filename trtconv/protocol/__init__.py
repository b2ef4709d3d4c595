"""The backend protocol, below the ONNX library and the backends: the `Runner` base class and
`RunOptions` (`runner`), what a converter gets and gives back (`request`) and support verdicts
(`support`)."""
