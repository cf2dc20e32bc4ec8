// Hamiltonian Monte Carlo over the network weights (Neal 2011): the
// gold-standard reference of the NNG paper's Tables 3-4, exported as a
// sample-set posterior that serves predictions like any other.
//
// Each training step is one HMC iteration of every chain on the full data
// set (batch_size() is N): momentum resampling, `leapfrog_steps` leapfrog
// steps, Metropolis accept/reject. The first `warmup` iterations adapt each
// chain's step size by dual averaging (Hoffman & Gelman 2014, Alg. 5) toward
// `target_accept` and are discarded; afterwards every `thin`-th state is kept.
// Step sizes are jittered by +-20% per iteration (Neal 2011) so that no
// Gaussian direction is explored with a fixed, possibly resonant, period.
// Chains run in lockstep as the weight samples of one batched forward pass.
#ifndef BNN_METHODS_HMC_H_
#define BNN_METHODS_HMC_H_

#include "bnn/methods/options.h"
#include "bnn/methods/prior.h"

namespace bnn {

class MethodRegistry;

struct HmcOptions {
  // Independent chains, started from different random initialisations.
  int chains = 4;
  // Adaptation iterations per chain, discarded.
  int warmup = 500;
  // Keep every thin-th post-warm-up state.
  int thin = 1;
  // Leapfrog steps per iteration.
  int leapfrog_steps = 20;
  // Initial leapfrog step size (adapted during warm-up).
  double step_size = 0.01;
  // Target Metropolis acceptance rate of the adaptation.
  double target_accept = 0.8;
  // Gaussian prior precisions and the fixed noise precision tau
  // (standardised units) of the potential -log p(D | w) - log p(w).
  PriorOptions prior;
  // Bound on the kept samples per chain (memory: D x chains x this).
  int max_samples = 2000;

  absl::Status Validate() const;
};

const OptionsSchema<HmcOptions>& HmcOptionsSchema();

// "hmc".
void RegisterHmc(MethodRegistry& registry);

}  // namespace bnn

#endif  // BNN_METHODS_HMC_H_
