//! Float math as free functions (`offload::sqrt(x)`): the host twins of offload-device's, from the model's one
//! definition.

offload_model::float_math!();
