"""Scale-out on Ray: offline scoring with Ray Data (:mod:`rewardkit.scale.data`) and serving
replicas with Ray Serve (:mod:`rewardkit.scale.serve`). Ray is an optional extra
(``pip install 'rewardkit[ray]'``); nothing here is imported by the rest of rewardkit."""
