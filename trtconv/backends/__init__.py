"""One package per backend (tf_native, tftrt, ort, trt), each declaring its record in `registry`:
support rules (`rules.py`), `convert(request)` and a runner factory. The protocol they implement
(the Runner base class, the conversion request, support verdicts) is `trtconv.protocol`."""
