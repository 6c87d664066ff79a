// open_model_source: model files through io/, dummy shapes through models/dummy_models.
#include "runtime/model_source.h"

#include "core/log.h"
#include "io/model_files.h"
#include "models/dense_decoder.h"
#include "models/dummy_models.h"

namespace roofline {

StatusOr<ModelSource> open_model_source(const std::string& path, const std::string& dummy_name) {
  if (path.empty() == dummy_name.empty())
    return invalid_argument("give either --model PATH or --dummy-weights NAME (exactly one)");
  ModelSource source;
  if (!dummy_name.empty()) {
    ROOFLINE_ASSIGN_OR_RETURN(source.config, dummy_model_config(dummy_name));
    source.weights = WeightStore::create_owning("dummy weights '" + dummy_name + "'");
    for (const auto& [name, shape] : dense_decoder_weight_shapes(source.config))
      ROOFLINE_RETURN_IF_ERROR(source.weights->add_virtual(name, DType::kBF16, shape));
    return source;
  }
  ROOFLINE_ASSIGN_OR_RETURN(ModelFiles files, open_model_files(path));
  ROOFLINE_ASSIGN_OR_RETURN(std::vector<std::string> unused,
                            unused_checkpoint_tensors(files.config, *files.weights));
  if (!unused.empty()) {
    std::string list;
    for (size_t i = 0; i < unused.size() && i < 5; ++i) list += (i ? ", " : "") + unused[i];
    if (unused.size() > 5) list += ", ...";
    ROOFLINE_LOG(kWarning, "'" << path << "': " << unused.size() << " tensor"
                               << (unused.size() == 1 ? " is" : "s are") << " not read by "
                               << files.config.architecture_name
                               << " as config.json describes it (Hugging Face leaves them unused "
                                  "too): "
                               << list);
  }
  source.config = std::move(files.config);
  source.weights = std::move(files.weights);
  source.gguf = std::move(files.gguf);
  return source;
}

}  // namespace roofline
