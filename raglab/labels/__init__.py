"""Human labels on a random sample of a run's cases (``raglab label``): the sample, the
labels stored with the run, and the prediction-powered estimates made from them."""
