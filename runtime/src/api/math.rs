//! Float math as free functions (`offload::sqrt(x)`): the host twins of device-std's, from the model's one
//! definition.

offload_model::float_math!();
