"""Load step: drive traffic at a deployed endpoint and record every request exactly.

runner.run_load(LoadRequest) -> LoadResult   # main-process entry point; never imports locust
shapes      traffic shapes as pure functions of the clock (SageMaker phases)
result      RequestLog / Timeline / LoadResult / LoadProgress and their files
recorder    bounded-memory accumulation inside the generator
config      the parent -> child settings (environment variables)
locustfile  the Locust user and shape; loaded only by the child process
null_endpoint  a fast KServe v2 stand-in server for tests and generator benchmarks
"""
